"""Session sign-in and sign-out for the web pages (the API uses tokens)."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from config.csp import with_csp


def _client_address(request: HttpRequest) -> str:
    """The client's address as the API's throttles read it: REMOTE_ADDR, or behind TRUSTED_PROXY_COUNT proxies
    (REST_FRAMEWORK's NUM_PROXIES) the address that many entries from the right of X-Forwarded-For."""
    return BaseThrottle().get_ident(Request(request))


def _failure_key(request: HttpRequest) -> str:
    """The counter a failed sign-in adds to: the name from this address.

    Never the address alone: everyone behind one proxy or NAT shares it, and one person's typos, or an
    attacker's guesses at other names, would lock them all out.
    """
    username = request.POST.get("username", "").strip().lower()[:150]
    return f"login-failures:{_client_address(request)}:{username}"


class ThrottledLoginView(auth_views.LoginView):
    """Django's sign-in, refused for LOGIN_LOCKOUT_SECONDS after LOGIN_MAX_FAILURES wrong passwords (429)."""

    template_name = "permissions/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        key = _failure_key(request)
        if (cache.get(key) or 0) >= settings.LOGIN_MAX_FAILURES:
            minutes = math.ceil(settings.LOGIN_LOCKOUT_SECONDS / 60)
            response = self.render_to_response(
                self.get_context_data(
                    throttled=f"Too many failed sign-ins. Wait {minutes} minute{'s' if minutes != 1 else ''} and try again."
                ),
                status=429,
            )
            response["Retry-After"] = str(settings.LOGIN_LOCKOUT_SECONDS)
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:  # the form came back: wrong name or password
            cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_SECONDS)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, timeout=settings.LOGIN_LOCKOUT_SECONDS)
        else:
            cache.delete(key)
        return response


class AdminLoginView(ThrottledLoginView):
    """The admin's sign-in: the same page, but a signed-in user who is not staff is told no (403). Sent
    back to /admin/, which sends anyone not staff here, they would go round in a loop."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        user = request.user
        if user.is_authenticated and not (user.is_active and user.is_staff):
            raise PermissionDenied("Only operators may open the admin.")
        return super().dispatch(request, *args, **kwargs)


login_page = with_csp(ThrottledLoginView.as_view())
admin_login_page = with_csp(AdminLoginView.as_view())
logout_page = auth_views.LogoutView.as_view()
