"""Production: secrets must come from the environment; no insecure defaults."""
from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

if not os.environ.get("SECRET_KEY"):
    raise ImproperlyConfigured("SECRET_KEY must be set in production (config.settings.production)")

from .base import *  # noqa: E402,F401,F403
from .base import env  # noqa: E402

DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
