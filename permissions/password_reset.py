"""Password reset by email, through Django's own views and signed one-time links, in the product's pages.

The answer to a request is the same whether an account has the address or not, throttled alike, so
the page tells no one which addresses have accounts. Accounts without a usable password (those made
by single sign-on) and disabled accounts get no email.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import reverse_lazy

from config.csp import with_csp
from permissions.pages import _client_address

WINDOW_SECONDS = 3600


def _counters(request: HttpRequest) -> list[str]:
    """Requests from this address, and for this email address (so many addresses cannot flood one inbox)."""
    email = request.POST.get("email", "").strip().lower()[:254]
    return [
        f"password-reset:address:{_client_address(request)}",
        f"password-reset:email:{hashlib.sha256(email.encode()).hexdigest()}",
    ]


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """Django's reset request, refused (429) past PASSWORD_RESET_MAX_REQUESTS an hour from one address or for one email."""

    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"
    success_url = reverse_lazy("password_reset_done")

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        counters = _counters(request)
        if any((cache.get(key) or 0) >= settings.PASSWORD_RESET_MAX_REQUESTS for key in counters):
            response = self.render_to_response(
                self.get_context_data(throttled="Too many reset requests. Wait an hour and try again."), status=429
            )
            response["Retry-After"] = str(WINDOW_SECONDS)
            return response
        for key in counters:
            cache.add(key, 0, timeout=WINDOW_SECONDS)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, timeout=WINDOW_SECONDS)
        return super().post(request, *args, **kwargs)


password_reset_page = with_csp(ThrottledPasswordResetView.as_view())
password_reset_sent_page = with_csp(auth_views.PasswordResetDoneView.as_view())
password_reset_confirm_page = with_csp(auth_views.PasswordResetConfirmView.as_view())
password_reset_complete_page = with_csp(auth_views.PasswordResetCompleteView.as_view())
