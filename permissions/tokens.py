"""API token format and hashing: `cairn_<prefix>_<secret>`, stored as prefix + HMAC digest."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings

TOKEN_PREFIX = "cairn_"


def new_token() -> tuple[str, str]:
    """A fresh (plaintext token, lookup prefix) pair."""
    prefix = secrets.token_hex(6)
    return f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}", prefix


def token_prefix(token: str) -> str | None:
    """The lookup prefix of a well-formed token, None otherwise."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = token[len(TOKEN_PREFIX) :].partition("_")
    if not sep or len(prefix) != 12 or not secret:
        return None
    return prefix


def token_digest(token: str) -> str:
    # Keyed with SECRET_KEY so a leaked table alone cannot be brute-forced offline.
    return hmac.new(settings.SECRET_KEY.encode(), token.encode(), hashlib.sha256).hexdigest()


def digests_match(token: str, digest: str) -> bool:
    return hmac.compare_digest(token_digest(token), digest)
