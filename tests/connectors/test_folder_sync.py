"""A folder of plain files kept in sync: created, updated, archived, restored; an unchanged re-sync embeds nothing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from connectors.models import SourceSync, SyncedSource
from connectors.services import source_create, source_pause
from connectors.tasks import sync_due_sources
from documents.models import Document
from tests.conftest import Cast
from tests.connectors.conftest import SyncAndIndex, embedded_texts, write


def counts(sync) -> tuple[int, int, int, int, int, int]:
    return (sync.seen, sync.created, sync.changed, sync.unchanged, sync.deleted, sync.failed)


def folder_source(cast: Cast, root: Path, flavour: str = "files") -> SyncedSource:
    return source_create(
        by=cast.alice,
        name="Wiki",
        kind="folder",
        config={"path": str(root), "flavour": flavour},
        collection=cast.handbook,
        sync=False,
    )


def test_a_folder_source_creates_updates_archives_and_restores_its_documents(
    cast: Cast, root: Path, sync_and_index: SyncAndIndex
) -> None:
    write(
        root,
        {
            "guide.md": "# Guide\n\nHow to deploy.\n",
            "notes/faq.txt": "Questions and answers.\n",
            "old.md": "# Old\n\nGone soon.\n",
        },
    )
    source = folder_source(cast, root)

    first = sync_and_index(source)
    assert counts(first) == (3, 3, 0, 0, 0, 0)
    documents = {d.title: d for d in Document.objects.filter(collection=cast.handbook)}
    assert set(documents) == {"Guide", "faq", "Old"}
    assert documents["Guide"].origin == str(root / "guide.md")

    embedded = len(embedded_texts())
    again = sync_and_index(source)
    assert counts(again) == (3, 0, 0, 3, 0, 0)
    assert len(embedded_texts()) == embedded, "an unchanged re-sync embeds nothing"

    write(root, {"guide.md": "# Guide\n\nHow to deploy, and roll back.\n", "new.md": "# New\n\nFresh.\n"})
    (root / "old.md").unlink()
    (root / "notes/faq.txt").rename(root / "notes/questions.txt")
    changed = sync_and_index(source)
    assert counts(changed) == (3, 2, 1, 0, 2, 0)
    guide = Document.objects.get(pk=documents["Guide"].pk)
    assert (guide.version, "roll back" in guide.text) == (2, True)
    assert Document.objects.get(pk=documents["Old"].pk).archived_at is not None
    assert Document.objects.get(pk=documents["faq"].pk).archived_at is not None
    assert Document.objects.filter(collection=cast.handbook, archived_at__isnull=True).count() == 3

    write(root, {"old.md": "# Old\n\nGone soon.\n"})
    back = sync_and_index(source)
    assert counts(back) == (4, 0, 1, 3, 0, 0)
    assert Document.objects.get(pk=documents["Old"].pk).archived_at is None


def test_beat_syncs_the_active_sources_whose_schedule_is_due_and_not_the_paused_ones(cast: Cast, root: Path) -> None:
    write(root, {"guide.md": "# Guide\n\nHow to deploy.\n"})
    due = folder_source(cast, root)
    paused = source_create(
        by=cast.alice, name="Paused", kind="folder", config={"path": str(root)}, collection=cast.private, sync=False
    )
    source_pause(source=paused)
    later = source_create(
        by=cast.alice, name="Later", kind="folder", config={"path": str(root)}, collection=cast.private, sync=False
    )
    SyncedSource.objects.filter(pk__in=[due.pk, paused.pk]).update(next_sync_at=timezone.now() - timedelta(minutes=1))

    assert sync_due_sources() == 1  # eager: the sync ran in this process
    assert [s.source_id for s in SourceSync.objects.all()] == [due.pk]
    due.refresh_from_db()
    assert due.next_sync_at is not None and due.next_sync_at > timezone.now() + timedelta(minutes=59), (
        "the next one an interval on"
    )
    assert not SourceSync.objects.filter(source__in=[paused, later]).exists()
