"""`manage.py create_team NAME --owner USERNAME`: a team and its owner, as the setup page makes them."""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.conf import settings
from django.contrib.auth import password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import ApplicationError
from permissions.members.services import owner_create, owner_set
from permissions.models import User

PASSWORD_VARIABLE = "DJANGO_SUPERUSER_PASSWORD"  # createsuperuser's, for the same purpose


class Command(BaseCommand):
    help = (
        "Create a team and its owner (a team admin who may also use /admin/). The owner is a new account, "
        "whose password is asked for, or an existing account without a team (one made with createsuperuser)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The team's name.")
        parser.add_argument("--owner", required=True, help="The owner's username (new, or an account without a team).")
        parser.add_argument("--email", default="", help="The new owner's email.")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help=f"Ask nothing: a new owner's password is read from {PASSWORD_VARIABLE}.",
        )
        parser.add_argument("--url", default="", help="Where people open Cairn (default SITE_URL, else http://127.0.0.1:8000).")

    def handle(self, *args: Any, name: str, owner: str, email: str, interactive: bool, url: str, **options: Any) -> None:
        existing = User.objects.filter(username=owner).first()
        try:
            if existing is not None:
                user = owner_set(team_name=name, user=existing)
            else:
                password = self._password(owner, email, interactive)
                user = owner_create(team_name=name, username=owner, password=password, email=email)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        site = url.rstrip("/") or settings.SITE_URL or "http://127.0.0.1:8000"
        self.stdout.write(
            f"Team {user.team} created; {user.username} is its owner (team admin, and may use {site}/admin/).\n"
            "Next:\n"
            f"  1. Sign in at {site}/login as {user.username}.\n"
            f"  2. Create a collection ({site}/team/collections, or the collections.create API).\n"
            f"  3. Import documents ({site}/import, or manage.py import_path DIR --collection ID).\n"
            f"  4. Invite your people ({site}/team/members, or manage.py invite --team {name!r} --role member)."
        )

    def _password(self, username: str, email: str, interactive: bool) -> str:
        candidate = User(username=username, email=email)
        if not interactive:
            password = os.environ.get(PASSWORD_VARIABLE, "")
            if not password:
                raise CommandError(f"--noinput needs the new owner's password in {PASSWORD_VARIABLE}.")
            self._validate(password, candidate)
            return password
        while True:
            password = getpass.getpass(f"Password for {username}: ")
            if password != getpass.getpass("Password (again): "):
                self.stderr.write("The passwords did not match.")
                continue
            try:
                self._validate(password, candidate)
            except CommandError as exc:
                self.stderr.write(str(exc))
                continue
            return password

    def _validate(self, password: str, user: User) -> None:
        try:
            password_validation.validate_password(password, user)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
