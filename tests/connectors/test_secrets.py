"""Sources' secrets: encrypted at rest, rotated to a new key, and never in a sync's error or the logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from pytest_django import Settings

from connectors.models import SyncedSource
from connectors.secrets import decrypt_secrets
from connectors.services import source_create
from connectors.sync import source_sync
from tests.conftest import Cast

SECRET = "hunter2-very-secret"


def test_rotation_moves_secrets_to_the_new_key_and_the_old_one_can_go(
    cast: Cast, root: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CONNECTORS_SECRET_KEY = [old]
    source = source_create(
        by=cast.alice,
        name="Wiki",
        kind="folder",
        config={"path": str(root)},
        secrets={"token": SECRET},
        collection=cast.handbook,
        sync=False,
    )
    stored = SyncedSource.objects.get(pk=source.pk).secrets
    assert SECRET not in stored

    settings.CONNECTORS_SECRET_KEY = [new, old]
    call_command("rotate_source_secrets")
    assert "Re-encrypted the secrets of 1 source(s)" in capsys.readouterr().out
    settings.CONNECTORS_SECRET_KEY = [new]
    assert decrypt_secrets(SyncedSource.objects.get(pk=source.pk).secrets) == {"token": SECRET}


def test_secrets_no_key_decrypts_fail_the_sync_with_a_clear_error_and_leak_nowhere(
    cast: Cast, root: Path, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.CONNECTORS_SECRET_KEY = [Fernet.generate_key().decode()]
    source = source_create(
        by=cast.alice,
        name="Wiki",
        kind="folder",
        config={"path": str(root)},
        secrets={"token": SECRET},
        collection=cast.handbook,
        sync=False,
    )
    settings.CONNECTORS_SECRET_KEY = [Fernet.generate_key().decode()]
    with caplog.at_level(logging.DEBUG):
        sync = source_sync(source=source)
    assert (sync.stage, sync.error) == (
        "failed",
        "The source's secrets cannot be decrypted with the configured CONNECTORS_SECRET_KEY; enter them again.",
    )
    assert SECRET not in caplog.text
