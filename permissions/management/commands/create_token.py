from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from permissions.models import TokenScope, User
from permissions.services import api_token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--scope", choices=[s.value for s in TokenScope], default=TokenScope.READ)
        parser.add_argument("--name", default="")
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args: Any, username: str, scope: str, name: str, expires_in_days: int | None, **options: Any) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if expires_in_days is not None and not 1 <= expires_in_days <= settings.API_TOKEN_MAX_DAYS:
            raise CommandError(f"--expires-in-days must be between 1 and {settings.API_TOKEN_MAX_DAYS} (API_TOKEN_MAX_DAYS).")
        expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
        issued = api_token_create(user=user, scope=scope, name=name or "created by create_token", expires_at=expires_at)
        self.stdout.write(issued.plaintext)
