"""The request types of views that run only for a signed-in user (pages) or an authenticated token (the API)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from rest_framework.request import Request

from permissions.models import User


class AuthenticatedHttpRequest(HttpRequest):
    """What a `login_required` view receives: `user` is a signed-in User, never AnonymousUser.

    For annotations only (django-stubs' documented pattern); Django builds the requests.
    """

    user: User


class AuthenticatedRequest(Request):
    """What an API view behind `HasTokenScope` (every RpcApi) receives: `user` is a signed-in User.

    For annotations only, as `AuthenticatedHttpRequest`; DRF builds the requests.
    """

    user: User


def link_for(request: HttpRequest, path: str) -> str:
    """An address to hand to someone else (an invite link): SITE_URL's when set, else the one this request came to."""
    return f"{settings.SITE_URL}{path}" if settings.SITE_URL else request.build_absolute_uri(path)
