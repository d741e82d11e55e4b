"""`Authorization: Bearer <token>` for the API, and the scope check that reads request.auth."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import Model
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from permissions.models import ApiToken, Team, User
from permissions.policy import can_write
from permissions.tokens import digests_match, token_prefix

if TYPE_CHECKING:  # DRF's views load this module (DEFAULT_AUTHENTICATION_CLASSES): importing them here would be circular
    from rest_framework.request import Request
    from rest_framework.views import APIView

# last_used_at is informational; writing it on every request would put a row update on
# every search, so it is refreshed at most once a minute.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@functools.cache
def _token_query() -> tuple[str, list[tuple[type[Model], list[str]]]]:
    """The token, its user and their team in one query, compiled once per process.

    What `select_related("user", "user__team")` runs, but Django compiles such a query anew on every
    call (2-3 ms on two busy cores, more than running it), and every API request looks a token up.
    """
    models: tuple[type[Model], ...] = (ApiToken, User, Team)
    parts = [(model, [f.attname for f in model._meta.concrete_fields]) for model in models]
    columns = ", ".join(
        f"{alias}.{connection.ops.quote_name(f.column or f.attname)}"
        for alias, model in zip(("t", "u", "m"), models, strict=True)
        for f in model._meta.concrete_fields
    )
    sql = f"""SELECT {columns} FROM {ApiToken._meta.db_table} t
              JOIN {User._meta.db_table} u ON u.id = t.user_id
              LEFT JOIN {Team._meta.db_table} m ON m.id = u.team_id
              WHERE t.prefix = %s"""
    return sql, parts


def token_with_user(prefix: str) -> ApiToken | None:
    """The token with this prefix, its user and the user's team loaded, or None."""
    sql, parts = _token_query()
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    loaded: list[Model | None] = []
    start = 0
    for model, attnames in parts:
        values = row[start : start + len(attnames)]
        start += len(attnames)
        loaded.append(model.from_db(connection.alias, attnames, values) if values[0] is not None else None)
    token, user, team = loaded
    assert isinstance(token, ApiToken) and isinstance(user, User)
    user.team = team  # type: ignore[assignment]  # None for an operator without a team
    token.user = user
    return token


@functools.cache
def _ancestors_query() -> str:
    table = connection.ops.quote_name(ApiToken._meta.db_table)
    # UNION, not UNION ALL: a cycle of parents (only a hand-edited table could make one) ends the walk.
    return f"""WITH RECURSIVE ancestors AS (
                   SELECT id, parent_id, revoked_at, expires_at FROM {table} WHERE id = %s
                   UNION
                   SELECT t.id, t.parent_id, t.revoked_at, t.expires_at FROM {table} t JOIN ancestors a ON t.id = a.parent_id
               )
               SELECT coalesce(bool_or(revoked_at IS NOT NULL), false), min(expires_at) FROM ancestors"""


def ancestors_state(parent_id: uuid.UUID) -> tuple[bool, datetime | None]:
    """Whether any token above a token (its parent, the parent's parent...) is revoked, and the earliest expiry among them.

    Revoking cascades and a child never outlives its parent when created, but the table can be edited
    afterwards (the admin, SQL): so the chain itself is checked, at every request of a child token.
    """
    with connection.cursor() as cursor:
        cursor.execute(_ancestors_query(), [parent_id])
        revoked, expires_at = cursor.fetchone()
    return revoked, expires_at


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        keyword, _, raw = header.partition(" ")
        if keyword.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        prefix = token_prefix(raw)
        if prefix is None:
            raise exceptions.AuthenticationFailed("Invalid API token.")
        token = token_with_user(prefix)
        if token is None or not digests_match(raw, token.digest):
            raise exceptions.AuthenticationFailed("Invalid API token.")
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token has been revoked.")
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("This API token has expired.")
        if token.parent_id is not None:  # only tokens created by tokens pay this query
            revoked, expires_at = ancestors_state(token.parent_id)
            if revoked:
                raise exceptions.AuthenticationFailed("An API token this one was created from has been revoked.")
            if expires_at is not None and expires_at <= now:
                raise exceptions.AuthenticationFailed("An API token this one was created from has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is inactive.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def may_write(request: Request) -> bool:
    """Whether the request may change things: a write-scoped token or a signed-in session, of a user whose
    role lets them write (a read-only member's requests are all read-scoped, `policy.can_write`).

    Session users (the /rag page and the browsable schema) act with their full rights.
    """
    user = request.user
    return (not isinstance(request.auth, ApiToken) or request.auth.can_write) and isinstance(user, User) and can_write(user)


class HasTokenScope(permissions.BasePermission):
    """Authenticated; views marked `write_scope = True` also need what `may_write` asks."""

    message = "This endpoint needs an API token with the write scope."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated("Authentication credentials were not provided.")
        if not getattr(view, "write_scope", False):
            return True
        if isinstance(request.user, User) and not can_write(request.user):
            raise exceptions.PermissionDenied("You are a read-only member of your team: you can read, not change anything.")
        return may_write(request)
