"""Writes for teams, users and API tokens."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from config.errors import Forbidden, ValidationFailed
from permissions.models import ApiToken, Group, GroupMembership, Team, TeamRole, TokenScope, User
from permissions.tokens import new_token, token_digest


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str


@transaction.atomic
def api_token_create(
    *,
    user: User,
    scope: str = TokenScope.READ,
    name: str = "",
    expires_at: datetime | None = None,
    parent: ApiToken | None = None,
) -> IssuedToken:
    """Create a token; the plaintext exists only in the returned value, shown once.

    An expiry must carry a time zone, lie in the future and at most API_TOKEN_MAX_DAYS ahead. A token
    created by another token (`parent`, the API's caller) is its child: no wider scope, no later
    expiry, and without an expiry of its own it gets the latest one allowed.
    """
    if expires_at is not None:
        token_expiry_check(expires_at)
    if parent is not None:
        if scope == TokenScope.WRITE and not parent.can_write:
            raise Forbidden("A read-scoped token cannot create a write-scoped token.")
        expires_at = child_token_expiry(parent=parent, expires_at=expires_at)
    plaintext, prefix = new_token()
    token = ApiToken(
        user=user,
        parent=parent,
        name=name,
        prefix=prefix,
        digest=token_digest(plaintext),
        scope=scope,
        expires_at=expires_at,
    )
    token.full_clean()
    token.save()
    return IssuedToken(token=token, plaintext=plaintext)


def token_expiry_check(expires_at: datetime) -> None:
    if timezone.is_naive(expires_at):
        raise ValidationFailed("expiresAt: must include a time zone, e.g. 2027-01-31T00:00:00Z.")
    now = timezone.now()
    if expires_at <= now:
        raise ValidationFailed("expiresAt: must be in the future.")
    if expires_at > now + timedelta(days=settings.API_TOKEN_MAX_DAYS):
        raise ValidationFailed(f"expiresAt: must be at most {settings.API_TOKEN_MAX_DAYS} days from now.")


def child_token_expiry(*, parent: ApiToken, expires_at: datetime | None) -> datetime:
    """The expiry of a token `parent` creates: the one asked for if the parent outlives it, else refused;
    none asked for, the latest allowed (the parent's, at most API_TOKEN_MAX_DAYS from now)."""
    if expires_at is None:
        latest = timezone.now() + timedelta(days=settings.API_TOKEN_MAX_DAYS)
        return latest if parent.expires_at is None else min(latest, parent.expires_at)
    if parent.expires_at is not None and expires_at > parent.expires_at:
        raise ValidationFailed(
            f"expiresAt: must not be later than {parent.expires_at.isoformat()}, when the token creating it expires."
        )
    return expires_at


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke `token` and every token created from it, as `api_tokens_revoke` does."""
    api_tokens_revoke(tokens=ApiToken.objects.filter(pk=token.pk))
    token.refresh_from_db(fields=["revoked_at"])
    return token


@transaction.atomic
def api_tokens_revoke(*, tokens: QuerySet[ApiToken]) -> int:
    """Revoke `tokens` and every token created from them, their children's children included; how many were live.

    Authentication refuses a token below a revoked one anyway; revoking the descendants too shows it
    in apiKeys.list and the admin.
    """
    now = timezone.now()
    revoked = 0
    ids = set(tokens.values_list("pk", flat=True))
    seen: set[uuid.UUID] = set()
    while ids:
        revoked += ApiToken.objects.filter(pk__in=ids, revoked_at__isnull=True).update(revoked_at=now)
        seen |= ids
        ids = set(ApiToken.objects.filter(parent_id__in=ids).values_list("pk", flat=True)) - seen
    return revoked


@transaction.atomic
def team_create(*, name: str) -> Team:
    team = Team(name=name)
    team.full_clean()
    team.save()
    return team


@transaction.atomic
def user_create(
    *,
    team: Team | None,
    username: str,
    password: str | None = None,
    email: str = "",
    role: str = TeamRole.MEMBER,
    is_staff: bool = False,
    is_superuser: bool = False,
) -> User:
    user = User(
        team=team,
        username=username,
        email=email,
        role=role,
        is_staff=is_staff or is_superuser,
        is_superuser=is_superuser,
    )
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.full_clean()
    user.save()
    return user


def _group_name_check(*, team_id: uuid.UUID, name: str, group_id: uuid.UUID | None = None) -> None:
    others = Group.objects.filter(team_id=team_id, name__iexact=name)
    if group_id is not None:
        others = others.exclude(pk=group_id)
    if others.exists():
        raise ValidationFailed(f'name: your team already has a group named "{name}".')


@transaction.atomic
def group_create(*, by: User, name: str) -> Group:
    """A group of `by`'s team; callers check can_manage_groups first, which requires a team."""
    assert by.team_id is not None, "only a user with a team can create a group"
    _group_name_check(team_id=by.team_id, name=name)
    group = Group(team_id=by.team_id, name=name)
    group.full_clean()
    group.save()
    return group


@transaction.atomic
def group_update(*, group: Group, name: str) -> Group:
    if name != group.name:
        _group_name_check(team_id=group.team_id, name=name, group_id=group.pk)
        group.name = name
        group.full_clean()
        group.save(update_fields=["name"])
    return group


@transaction.atomic
def group_delete(*, group: Group) -> Group:
    """Delete a group: its members leave it, and the collections shared with it are no longer shared with them
    through it (what they may read changes at once). The people and the collections stay."""
    group_id = group.pk
    group.delete()
    group.pk = group_id  # Django clears the instance's id; the caller reports what was deleted
    return group


@transaction.atomic
def group_member_add(*, group: Group, user: User) -> GroupMembership:
    assert user.team_id == group.team_id, "callers find the user among the group's team (team_member_get)"
    membership, _ = GroupMembership.objects.get_or_create(group=group, user=user)
    return membership


@transaction.atomic
def group_member_remove(*, group: Group, user: User) -> None:
    GroupMembership.objects.filter(group=group, user=user).delete()
