"""Create (or refresh) the demo team, users, collections and documents, and print a token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from documents import services
from documents.models import Collection, Document
from permissions.models import Access, ApiToken, Role, Team, TeamRole, TokenScope, User
from permissions.services import api_token_create, api_token_revoke, team_create, user_create

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
DEMO_PASSWORD = "cairn-demo"
DEMO_TOKEN_NAME = "demo token"

# What the /rag page offers Acme's people to ask: each is answered by a demo document.
ACME_QUESTIONS = [
    "How many vacation days do I get?",
    "How do I roll back a deployment?",
    "What should I do if I lose my laptop?",
    "When are the core hours for remote work?",
]

# (file, team, collection)
DEMO_DOCUMENTS = [
    ("handbook-onboarding.md", "Acme", "Handbook"),
    ("handbook-security.md", "Acme", "Handbook"),
    ("handbook-remote.md", "Acme", "Handbook"),
    ("engineering-deploy.md", "Acme", "Engineering"),
    ("engineering-oncall.md", "Acme", "Engineering"),
    ("globex-strategy.md", "Globex", "Strategy"),
]


class Command(BaseCommand):
    help = "Create the demo team (alice, bob, charlie), sample documents and a write-scoped API token for alice."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", default="alice", help="Whose API token to print (default alice).")

    def handle(self, *args: Any, user: str, **options: Any) -> None:
        with transaction.atomic():
            acme = Team.objects.filter(name="Acme").first() or team_create(name="Acme")
            acme.example_questions = ACME_QUESTIONS
            acme.save(update_fields=["example_questions"])
            globex = Team.objects.filter(name="Globex").first() or team_create(name="Globex")
            alice = self._user(acme, "alice", role=TeamRole.ADMIN)
            self._user(acme, "bob")
            charlie = self._user(globex, "charlie", role=TeamRole.ADMIN)
            collections = {
                ("Acme", "Handbook"): self._collection(alice, "Handbook", Access.READ),
                ("Acme", "Engineering"): self._collection(alice, "Engineering", Access.NONE),
                ("Globex", "Strategy"): self._collection(charlie, "Strategy", Access.READ),
            }
            services.collection_membership_set(collection=collections[("Acme", "Handbook")], user=alice, role=Role.READ_WRITE)
            services.collection_membership_set(collection=collections[("Acme", "Engineering")], user=alice, role=Role.READ_WRITE)
            created = 0
            for filename, team_name, collection_name in DEMO_DOCUMENTS:
                collection = collections[(team_name, collection_name)]
                text = (DEMO_DIR / filename).read_text()
                title = text.splitlines()[0].lstrip("# ").strip()
                if not Document.objects.filter(collection=collection, title=title, deleted_at__isnull=True).exists():
                    author = alice if team_name == "Acme" else charlie
                    services.document_create(by=author, collection=collection, title=title, text=text, publish=True)
                    created += 1
            owner = User.objects.get(username=user)
            # One live demo token per user: each run revokes the one printed last time.
            for previous in ApiToken.objects.filter(user=owner, name=DEMO_TOKEN_NAME, revoked_at__isnull=True):
                api_token_revoke(token=previous)
            issued = api_token_create(user=owner, scope=TokenScope.WRITE, name=DEMO_TOKEN_NAME)
        self.stdout.write(
            f"Demo data ready: {created} new document(s). Users alice (admin, also in /admin/), bob (reads the Handbook), "
            f"charlie (another team); password for all: {DEMO_PASSWORD}"
        )
        self.stdout.write(f"API token: {issued.plaintext}")

    def _user(self, team: Team, username: str, role: str = TeamRole.MEMBER) -> User:
        existing = User.objects.filter(username=username).first()
        if existing:
            return existing
        # alice operates the demo, so she may also use the Django admin.
        return user_create(team=team, username=username, password=DEMO_PASSWORD, role=role, is_superuser=username == "alice")

    def _collection(self, by: User, name: str, access: str) -> Collection:
        assert by.team_id is not None, "the demo users are created with a team"
        existing = Collection.objects.filter(team_id=by.team_id, name=name).first()
        return existing or services.collection_create(by=by, name=name, default_access=access)
