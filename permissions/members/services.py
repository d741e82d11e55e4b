"""Writes for a team's people: the first team and its owner, invites, roles, deactivation."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.errors import Forbidden, NotFound, ValidationFailed
from permissions.members.selectors import team_exists
from permissions.models import Invite, InviteStatus, Team, TeamRole, User
from permissions.policy import can_manage_members
from permissions.services import team_create, user_create
from permissions.tokens import token_digest

# The key of the advisory lock two setup requests queue on, so only one of them creates the first team.
SETUP_LOCK = 0x636169726E  # "cairn"


@dataclass(frozen=True)
class IssuedInvite:
    """An invite just created, and the secret of its link: shown this once, only its digest is stored."""

    invite: Invite
    token: str

    @property
    def path(self) -> str:
        return invite_path(self.token)


def invite_path(token: str) -> str:
    return f"/invite/{token}"


class InviteUnusable(ValidationFailed):
    """An invite link that does not (or no longer) let anyone in; the message says why."""


@transaction.atomic
def owner_create(*, team_name: str, username: str, password: str | None, email: str = "") -> User:
    """A new team and its owner: a team admin who also operates the install (staff and superuser, for /admin/)."""
    team = team_create(name=team_name)
    return user_create(team=team, username=username, password=password, email=email, role=TeamRole.ADMIN, is_superuser=True)


@transaction.atomic
def owner_set(*, team_name: str, user: User) -> User:
    """A new team owned by an existing account without a team (an operator made with createsuperuser)."""
    if user.team_id is not None:
        raise ValidationFailed(f"{user.username} already belongs to the team {user.team}.")
    user.team = team_create(name=team_name)
    user.role = TeamRole.ADMIN
    user.is_staff = user.is_superuser = True
    user.full_clean()
    user.save(update_fields=["team", "role", "is_staff", "is_superuser"])
    return user


@transaction.atomic
def setup_complete(*, team_name: str, username: str, password: str, email: str = "") -> User:
    """The setup page's first team and owner; refused (NotFound) once any team exists, so no one can take
    over an install that is already set up, even two visitors submitting at the same moment."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SETUP_LOCK])
    if team_exists():
        raise NotFound("Cairn is already set up.")
    return owner_create(team_name=team_name, username=username, password=password, email=email)


@transaction.atomic
def invite_create(*, team: Team, by: User | None, role: str = TeamRole.MEMBER, email: str = "") -> IssuedInvite:
    """An invite to `team` with `role`, valid for INVITE_LIFETIME_DAYS and for one person."""
    token = secrets.token_urlsafe(32)
    invite = Invite(
        team=team,
        created_by=by,
        role=role,
        email=email,
        digest=token_digest(token),
        expires_at=timezone.now() + timedelta(days=settings.INVITE_LIFETIME_DAYS),
    )
    invite.full_clean()
    invite.save()
    return IssuedInvite(invite=invite, token=token)


INVITE_REFUSALS = {
    InviteStatus.ACCEPTED: "This invite link has already been used. Sign in, or ask a team admin for a new link.",
    InviteStatus.REVOKED: "This invite link was revoked. Ask a team admin for a new link.",
    InviteStatus.EXPIRED: "This invite link has expired. Ask a team admin for a new link.",
}


def invite_check(invite: Invite | None) -> Invite:
    """The invite when its link can still be used; InviteUnusable saying why otherwise."""
    if invite is None:
        raise InviteUnusable("This invite link is not valid. Check that you copied all of it, or ask a team admin for a new one.")
    if invite.status != InviteStatus.PENDING:
        raise InviteUnusable(INVITE_REFUSALS[invite.status])
    return invite


@transaction.atomic
def invite_accept(*, invite: Invite, username: str, password: str, email: str = "") -> User:
    """The account the invite lets one person create, in its team with its role; the invite is used up."""
    invite_check(invite)
    now = timezone.now()
    # Claimed with a conditional update: of two people accepting the same link at once, one gets it.
    if Invite.objects.pending().filter(pk=invite.pk).update(accepted_at=now) != 1:
        invite.refresh_from_db()
        invite_check(invite)  # says why it can no longer be used
        raise InviteUnusable(INVITE_REFUSALS[InviteStatus.ACCEPTED])
    user = user_create(team=invite.team, username=username, password=password, email=email or invite.email, role=invite.role)
    Invite.objects.filter(pk=invite.pk).update(accepted_by=user)
    invite.refresh_from_db()
    return user


def invite_revoke(*, invite: Invite) -> Invite:
    """Revoke an invite not yet accepted (again: nothing changes); an accepted one is refused."""
    if invite.accepted_at is not None:
        raise ValidationFailed("This invite was already accepted: deactivate the account instead.")
    Invite.objects.filter(pk=invite.pk, accepted_at__isnull=True, revoked_at__isnull=True).update(revoked_at=timezone.now())
    invite.refresh_from_db()
    return invite


def _check_change(*, member: User, by: User, refusal: str) -> None:
    if not can_manage_members(by):
        raise Forbidden("Only team admins can manage members.")
    assert member.team_id == by.team_id, "callers find the member in the admin's team (selectors.member_get)"
    if member.pk == by.pk:
        raise Forbidden(refusal)


def _check_another_admin_remains(member: User) -> None:
    """Refuse to leave the team without an active admin; the team's row is locked so two admins demoting
    each other at once cannot both pass."""
    team_id = member.team_id
    assert team_id is not None, "a member who is an admin has a team"
    Team.objects.select_for_update().filter(pk=team_id).first()
    others = User.objects.filter(team_id=team_id, role=TeamRole.ADMIN, is_active=True).exclude(pk=member.pk)
    if not others.exists():
        raise Forbidden(f"{member.username} is the team's last admin: make someone else an admin first.")


@transaction.atomic
def member_role_set(*, member: User, role: str, by: User) -> User:
    if role not in TeamRole.values:
        raise ValidationFailed(f"role: must be one of {', '.join(TeamRole.values)}.")
    _check_change(member=member, by=by, refusal="You cannot change your own role: ask another team admin.")
    if member.is_team_admin and member.is_active and role != TeamRole.ADMIN:
        _check_another_admin_remains(member)
    member.role = role
    member.save(update_fields=["role"])
    return member


@transaction.atomic
def member_deactivate(*, member: User, by: User) -> User:
    """The account can no longer sign in nor use its API tokens; its documents and memberships stay."""
    _check_change(member=member, by=by, refusal="You cannot deactivate yourself: ask another team admin.")
    if member.is_team_admin and member.is_active:
        _check_another_admin_remains(member)
    member.is_active = False
    member.save(update_fields=["is_active"])
    return member


@transaction.atomic
def member_activate(*, member: User, by: User) -> User:
    _check_change(member=member, by=by, refusal="You cannot reactivate yourself.")
    member.is_active = True
    member.save(update_fields=["is_active"])
    return member
