"""Reads of a team's people and invites; each takes the viewer and sees only the viewer's own team."""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet
from django.utils import timezone

from config.errors import NotFound
from permissions.models import Invite, InviteStatus, Team, User
from permissions.tokens import token_digest


def team_exists() -> bool:
    """Whether Cairn has been set up: until a team exists, every page leads to /setup."""
    return Team.objects.exists()


def member_list(*, fetched_by: User) -> QuerySet[User]:
    """The viewer's team, deactivated accounts included; nobody for an operator without a team."""
    if fetched_by.team_id is None:
        return User.objects.none()
    return User.objects.filter(team_id=fetched_by.team_id).order_by("username", "id")


def member_get(*, fetched_by: User, user_id: uuid.UUID) -> User:
    """A member of the viewer's team; anyone else, as anyone who does not exist, is NotFound."""
    member = member_list(fetched_by=fetched_by).filter(pk=user_id).first()
    if member is None:
        raise NotFound("User not found.")
    return member


def invite_list(*, fetched_by: User, status: str | None = None) -> QuerySet[Invite]:
    """The invites of the viewer's team, newest first, of one `status` if given. Callers check that the viewer
    may manage members."""
    if fetched_by.team_id is None:
        return Invite.objects.none()
    invites = Invite.objects.filter(team_id=fetched_by.team_id)
    open_ = Q(accepted_at__isnull=True, revoked_at__isnull=True)
    match status:
        case InviteStatus.PENDING:
            invites = invites.pending()
        case InviteStatus.EXPIRED:
            invites = invites.filter(open_, expires_at__lte=timezone.now())
        case InviteStatus.ACCEPTED:
            invites = invites.filter(accepted_at__isnull=False)
        case InviteStatus.REVOKED:
            invites = invites.filter(accepted_at__isnull=True, revoked_at__isnull=False)
    return invites.order_by("-created_at", "id")


def invite_get(*, fetched_by: User, invite_id: uuid.UUID) -> Invite:
    invite = invite_list(fetched_by=fetched_by).filter(pk=invite_id).first()
    if invite is None:
        raise NotFound("Invite not found.")
    return invite


def invite_for_token(token: str) -> Invite | None:
    """The invite whose link carries `token`, whatever its state; None when no invite has it."""
    if not token or len(token) > 100:
        return None
    return Invite.objects.select_related("team").filter(digest=token_digest(token)).first()
