"""Session sign-in and sign-out for the web pages (the API uses tokens)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

from config.csp import with_csp

login_page = with_csp(auth_views.LoginView.as_view(template_name="permissions/login.html", redirect_authenticated_user=True))
logout_page = auth_views.LogoutView.as_view()
