"""Session sign-in and sign-out for the web pages (the API uses tokens)."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from config.csp import with_csp


def _failure_keys(request: HttpRequest) -> list[tuple[str, int]]:
    """The counters a failed sign-in adds to, each with its limit: the name from this address, and the address."""
    address = request.META.get("REMOTE_ADDR", "")
    username = request.POST.get("username", "").strip().lower()[:150]
    limit = settings.LOGIN_MAX_FAILURES
    return [(f"login-failures:{address}:{username}", limit), (f"login-failures:{address}", limit * 4)]


class ThrottledLoginView(auth_views.LoginView):
    """Django's sign-in, refused for LOGIN_LOCKOUT_SECONDS after LOGIN_MAX_FAILURES wrong passwords (429)."""

    template_name = "permissions/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        keys = _failure_keys(request)
        if any((cache.get(key) or 0) >= limit for key, limit in keys):
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
            for key, _ in keys:
                cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_SECONDS)
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr
                    cache.set(key, 1, timeout=settings.LOGIN_LOCKOUT_SECONDS)
        else:
            cache.delete(keys[0][0])
        return response


login_page = with_csp(ThrottledLoginView.as_view())
logout_page = auth_views.LogoutView.as_view()
