"""Writes for teams, users and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.errors import ValidationFailed
from permissions.models import ApiToken, Team, TokenScope, User
from permissions.tokens import new_token, token_digest


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str


@transaction.atomic
def api_token_create(
    *, user: User, scope: str = TokenScope.READ, name: str = "", expires_at: datetime | None = None
) -> IssuedToken:
    """Create a token; the plaintext exists only in the returned value, shown once.

    An expiry must carry a time zone, lie in the future and at most API_TOKEN_MAX_DAYS ahead.
    """
    if expires_at is not None:
        token_expiry_check(expires_at)
    plaintext, prefix = new_token()
    token = ApiToken(user=user, name=name, prefix=prefix, digest=token_digest(plaintext), scope=scope, expires_at=expires_at)
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


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


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
    is_team_admin: bool = False,
    is_staff: bool = False,
    is_superuser: bool = False,
) -> User:
    user = User(
        team=team,
        username=username,
        email=email,
        is_team_admin=is_team_admin,
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
