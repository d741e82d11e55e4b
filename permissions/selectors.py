"""Reads of people and groups that take the viewer: another team's are never found."""

from __future__ import annotations

import uuid

from django.db.models import Count, QuerySet

from config.errors import NotFound
from permissions.models import Group, User
from permissions.policy import can_manage_groups


def team_member_get(*, user: User, user_id: uuid.UUID) -> User:
    """An active member of the user's team; NotFound otherwise."""
    member = User.objects.filter(team_id=user.team_id, pk=user_id, is_active=True).first() if user.team_id else None
    if member is None:
        raise NotFound("User not found.")
    return member


def team_member_list(*, user: User) -> QuerySet[User]:
    """The active members of the user's team, by name (whom a team admin may add to a group or a collection)."""
    if user.team_id is None:
        return User.objects.none()
    return User.objects.filter(team_id=user.team_id, is_active=True).order_by("username")


def group_list(*, user: User) -> QuerySet[Group]:
    """The groups a user may see, by name, each with `member_count`: a team admin sees every group of the
    team, anyone else the groups they are in."""
    if user.team_id is None:
        return Group.objects.none()
    groups = Group.objects.filter(team_id=user.team_id)
    if not can_manage_groups(user):
        groups = groups.filter(memberships__user_id=user.pk)
    return groups.annotate(member_count=Count("memberships", distinct=True)).order_by("name", "id")


def group_get(*, user: User, group_id: uuid.UUID) -> Group:
    """A group `group_list` shows the user; NotFound otherwise."""
    group = group_list(user=user).filter(pk=group_id).first()
    if group is None:
        raise NotFound("Group not found.")
    return group


def team_group_get(*, user: User, group_id: uuid.UUID) -> Group:
    """Any group of the user's team (whom a collection may be shared with, as any member may be named); NotFound otherwise."""
    group = Group.objects.filter(team_id=user.team_id, pk=group_id).first() if user.team_id else None
    if group is None:
        raise NotFound("Group not found.")
    return group


def group_members(*, group: Group) -> QuerySet[User]:
    return group.members.order_by("username")
