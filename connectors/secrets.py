"""Sources' secrets, encrypted at rest with Fernet keys from settings (CONNECTORS_SECRET_KEY).

The first key encrypts; every key decrypts (MultiFernet), so a key is rotated by putting a new one
first, running `manage.py rotate_source_secrets`, then dropping the old one. Unset, one key is
derived from SECRET_KEY. Secrets leave this module only towards a connector's `from_config`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretsUnreadable(Exception):
    """The stored secrets were encrypted with a key no longer configured."""


def _keys() -> MultiFernet:
    keys = list(settings.CONNECTORS_SECRET_KEY)
    if not keys:
        # Derived, not SECRET_KEY itself: a Fernet key is 32 bytes, and this one is used for nothing else.
        digest = hashlib.sha256(b"cairn connectors secrets\x00" + settings.SECRET_KEY.encode()).digest()
        keys = [base64.urlsafe_b64encode(digest).decode()]
    return MultiFernet([Fernet(key) for key in keys])


def encrypt_secrets(secrets: Mapping[str, str]) -> str:
    """One token holding the secrets' JSON; empty when there are none."""
    if not secrets:
        return ""
    return _keys().encrypt(json.dumps(dict(secrets), sort_keys=True).encode()).decode()


def decrypt_secrets(token: str) -> dict[str, str]:
    if not token:
        return {}
    try:
        return json.loads(_keys().decrypt(token.encode()))
    except InvalidToken as exc:
        raise SecretsUnreadable(
            "The source's secrets cannot be decrypted with the configured CONNECTORS_SECRET_KEY; enter them again."
        ) from exc


def rotate_secrets(token: str) -> str:
    """The same secrets under the first configured key."""
    if not token:
        return ""
    try:
        return _keys().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretsUnreadable("The secrets match no configured key.") from exc
