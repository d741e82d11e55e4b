"""`manage.py invite`: print an invite link to a team, as the members page and invites.create make them."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from permissions.members.services import invite_create
from permissions.models import Team, TeamRole


class Command(BaseCommand):
    help = "Print a link that lets one person join a team with a role (it works once, for INVITE_LIFETIME_DAYS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", default="", help="The team's name or id (needed when there are several teams).")
        parser.add_argument("--role", choices=TeamRole.values, default=TeamRole.MEMBER)
        parser.add_argument("--email", default="", help="Whom the link is for (a note: no email is sent).")
        parser.add_argument("--url", default="", help="Where people open Cairn (default SITE_URL, else http://127.0.0.1:8000).")

    def handle(self, *args: Any, team: str, role: str, email: str, url: str, **options: Any) -> None:
        chosen = self._team(team)
        try:
            issued = invite_create(team=chosen, by=None, role=role, email=email)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        site = url.rstrip("/") or settings.SITE_URL or "http://127.0.0.1:8000"
        self.stderr.write(
            f"An invite to {chosen} as {TeamRole(role).label.lower()}{f' for {email}' if email else ''}: it works once, "
            f"for {settings.INVITE_LIFETIME_DAYS} days, and is not shown again. Send this link:"
        )
        self.stdout.write(f"{site}{issued.path}")

    def _team(self, name_or_id: str) -> Team:
        teams = Team.objects.order_by("name")
        if not name_or_id:
            found = list(teams[:2])
            if len(found) != 1:
                raise CommandError(
                    "There is no team yet: create one with create_team." if not found else "Name the team: --team NAME."
                )
            return found[0]
        try:
            by_id = teams.filter(pk=uuid.UUID(name_or_id)).first()
        except ValueError:
            by_id = None
        matches = [by_id] if by_id else list(teams.filter(name=name_or_id)[:2])
        if len(matches) != 1:
            raise CommandError(
                f"No team named {name_or_id!r}." if not matches else f"Several teams are named {name_or_id!r}: give its id."
            )
        return matches[0]
