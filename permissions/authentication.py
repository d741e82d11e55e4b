"""`Authorization: Bearer <token>` for the API, and the scope check that reads request.auth."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from permissions.models import ApiToken
from permissions.tokens import digests_match, token_prefix

# last_used_at is informational; writing it on every request would put a row update on
# every search, so it is refreshed at most once a minute.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
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
        token = ApiToken.objects.select_related("user", "user__team").filter(prefix=prefix).first()
        if token is None or not digests_match(raw, token.digest):
            raise exceptions.AuthenticationFailed("Invalid API token.")
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token has been revoked.")
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("This API token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is inactive.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class HasTokenScope(permissions.BasePermission):
    """Authenticated; views marked `write_scope = True` also need a write-scoped token.

    Session users (the /rag page and the browsable schema) act with their full rights.
    """

    message = "This endpoint needs an API token with the write scope."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated("Authentication credentials were not provided.")
        if getattr(view, "write_scope", False) and isinstance(request.auth, ApiToken):
            return request.auth.can_write
        return True
