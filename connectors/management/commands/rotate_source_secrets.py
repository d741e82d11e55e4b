"""Encrypt every source's secrets again with the first key of CONNECTORS_SECRET_KEY (after adding a new key first)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from connectors.models import SyncedSource
from connectors.secrets import SecretsUnreadable, rotate_secrets


class Command(BaseCommand):
    help = "Re-encrypt sources' secrets with the first CONNECTORS_SECRET_KEY; then the old keys can be removed."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = unreadable = 0
        with transaction.atomic():
            for source in SyncedSource.objects.exclude(secrets="").select_for_update().only("id", "name", "secrets"):
                try:
                    source.secrets = rotate_secrets(source.secrets)
                except SecretsUnreadable:
                    unreadable += 1
                    self.stderr.write(
                        f"{source.name}: its secrets match no configured key; enter them again on the Sources page."
                    )
                    continue
                source.save(update_fields=["secrets"])
                rotated += 1
        self.stdout.write(f"Re-encrypted the secrets of {rotated} source(s) with the first key.")
        if unreadable:
            raise CommandError(f"{unreadable} source(s) had secrets no configured key decrypts.")
