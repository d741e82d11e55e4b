"""Production: secrets must come from the environment; no insecure defaults."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .base import *
from .base import _bool, env

SECRET_KEY = env("SECRET_KEY", default="")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set in production (config.settings.production)")

DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = _bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = _bool("CSRF_COOKIE_SECURE", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
