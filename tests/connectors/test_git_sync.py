"""A Git source end to end: served by `git daemon`, synced into a collection, changed, synced again, cited."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django import Settings

from connectors.models import SourceSync, SyncedSource
from connectors.services import source_create
from documents.models import Document
from rag.models import Chunk, EntityKind, Mention, Relation
from tests.conftest import ApiFor, Cast
from tests.connectors.conftest import SyncAndIndex, embedded_texts
from tests.connectors.git_servers import GitDaemon, GitRepo

BILLING = '''"""Billing: invoices and their totals."""
import decimal

TAX_RATE = decimal.Decimal("0.2")


def invoice_total(amount: decimal.Decimal) -> decimal.Decimal:
    """The invoice total adds the sales tax to the net amount."""
    return amount * (1 + TAX_RATE)


class Ledger:
    """Keeps every invoice of a customer."""

    def add(self, amount: decimal.Decimal) -> None:
        self.entries.append(amount)
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GitRepo, GitDaemon]]:
    root = tmp_path_factory.mktemp("git-sync")
    repo = GitRepo(root)
    daemon = GitDaemon(root).start()
    yield repo, daemon
    daemon.stop()


@pytest.fixture(autouse=True)
def git_cache(settings: Settings, tmp_path: Path) -> None:
    settings.CONNECTORS_GIT_CACHE_DIR = str(tmp_path / "git-cache")


def counts(sync: SourceSync) -> tuple[int, int, int, int, int, int]:
    return (sync.seen, sync.created, sync.changed, sync.unchanged, sync.deleted, sync.failed)


def git_source(cast: Cast, url: str) -> SyncedSource:
    return source_create(
        by=cast.alice, name="Code", kind="git", config={"url": url, "branch": "main"}, collection=cast.handbook, sync=False
    )


def test_a_git_source_follows_adds_edits_renames_and_deletions(
    cast: Cast, served: tuple[GitRepo, GitDaemon], sync_and_index: SyncAndIndex, api_for: ApiFor
) -> None:
    repo, daemon = served
    repo.write("README.md", "# Readme\n\nThe project's front page.\n")
    repo.write("docs/guide.md", "# Guide\n\nHow to deploy.\n")
    repo.write("src/billing.py", BILLING)
    repo.write("src/old.py", "def unused() -> None:\n    pass\n")
    first_commit = repo.commit("First")
    source = git_source(cast, daemon.url())

    first = sync_and_index(source)
    assert counts(first) == (4, 4, 0, 0, 0, 0)
    assert first.cursor == first_commit
    documents = {d.title: d for d in Document.objects.filter(collection=cast.handbook)}
    assert set(documents) == {"README.md", "docs/guide.md", "src/billing.py", "src/old.py"}
    billing = documents["src/billing.py"]
    assert billing.origin == f"src/billing.py@{first_commit}"
    assert billing.text.startswith('```python\n"""Billing'), "a code file is stored as one fenced block"

    chunks = {tuple(c.metadata.get("symbols", ())): c for c in Chunk.objects.filter(document=billing)}
    assert chunks[("invoice_total",)].metadata["lines"] == [7, 9]
    assert chunks[("Ledger",)].metadata["lines"] == [12, 16]
    symbol = Mention.objects.get(document_id=billing.pk, name="invoice_total")
    assert symbol.kind == EntityKind.SYMBOL
    defines = Relation.objects.get(document_id=billing.pk, predicate="DEFINES", target_id=symbol.entity_id)
    assert defines.source.name == "src/billing.py"

    citation = api_for(cast.alice).post("rag.answer", {"query": "How does the invoice total add the sales tax?"}).json()
    cited = citation["data"]["citations"][0]
    assert cited["location"] == "src/billing.py:7-9", "the function's own lines in the file"
    assert cited["lines"] == {"start": 7, "end": 9}

    embedded = len(embedded_texts())
    again = sync_and_index(source)
    assert counts(again) == (4, 0, 0, 4, 0, 0)
    assert len(embedded_texts()) == embedded, "an unchanged re-sync embeds nothing"

    repo.write("docs/guide.md", "# Guide\n\nHow to deploy, and how to roll back.\n")
    repo.write("docs/new.md", "# New\n\nFresh notes.\n")
    repo.rename("README.md", "docs/readme.md")
    repo.remove("src/old.py")
    repo.commit("Add, edit, rename, delete")
    changed = sync_and_index(source)
    assert counts(changed) == (4, 2, 1, 1, 2, 0)
    live = set(Document.objects.filter(collection=cast.handbook, archived_at__isnull=True).values_list("title", flat=True))
    assert live == {"docs/guide.md", "docs/new.md", "docs/readme.md", "src/billing.py"}
    archived = set(Document.objects.filter(collection=cast.handbook, archived_at__isnull=False).values_list("title", flat=True))
    assert archived == {"README.md", "src/old.py"}
    guide = Document.objects.get(pk=documents["docs/guide.md"].pk)
    assert (guide.version, "roll back" in guide.text) == (2, True)
