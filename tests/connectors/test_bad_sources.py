"""Bad sources get clear errors and lose nothing: a missing folder, files over the limit, binary or badly
encoded files, a source that fails mid-listing, and a sync killed mid-way that resumes without duplicates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from pytest_django import Settings

from connectors import kinds
from connectors.base import PreviousItem, SourceError, SourceItem
from connectors.models import SourceSync, SyncedItem, SyncStage
from connectors.services import source_create
from connectors.sync import source_sync, sync_create, sync_run
from connectors.tasks import sync_due_sources
from documents.models import Document
from tests.conftest import Cast
from tests.connectors.conftest import write


def test_a_missing_folder_fails_the_sync_and_archives_nothing(cast: Cast, root: Path) -> None:
    folder = root / "wiki"
    write(folder, {"guide.md": "# Guide\n\nDeploy.\n"})
    source = source_create(
        by=cast.alice, name="Wiki", kind="folder", config={"path": str(folder)}, collection=cast.handbook, sync=False
    )
    assert source_sync(source=source).created == 1
    (folder / "guide.md").unlink()
    folder.rmdir()
    failed = source_sync(source=source)
    assert (failed.stage, failed.error) == ("failed", f"The folder {folder} does not exist or is not a folder.")
    assert Document.objects.get(collection=cast.handbook).archived_at is None, "a failed listing archives nothing"


def test_bad_files_fail_alone_with_their_reason(cast: Cast, root: Path, settings: Settings) -> None:
    settings.IMPORT_MAX_FILE_SIZE = 1000
    write(
        root,
        {
            "good.md": "# Good\n\nFine.\n",
            "big.md": "x" * 1001,
            "image.bin": b"\x00\x01\x02binary\x00",
            "broken.txt": "caf\u00e9 ".encode() + b"\xff\xfe\xfd latin and utf-8 mixed",
        },
    )
    source = source_create(
        by=cast.alice, name="Wiki", kind="folder", config={"path": str(root)}, collection=cast.handbook, sync=False
    )
    sync = source_sync(source=source)
    assert (sync.seen, sync.created, sync.failed, sync.stage) == (4, 1, 3, "indexing")
    assert sorted((e["key"], e["message"]) for e in sync.errors) == [
        ("big.md", "The file is larger than the 1,000 bytes limit per file."),
        ("broken.txt", "Invalid text encoding: the file is UTF-8 but byte 6 is not (invalid start byte)."),
        ("image.bin", "Unsupported file type: binary data, not text."),
    ]


class Flaky:
    """A source that lists three items, then (when told) loses its connection before the listing ends."""

    kind = "flaky"
    fail_after: int | None = None
    killed_after: int | None = None
    fetched: list[str] = []

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> Flaky:
        return cls()

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        for n in range(3):
            if Flaky.fail_after == n:
                raise SourceError("The host stopped answering (connection reset).")
            if Flaky.killed_after == n:
                raise KeyboardInterrupt  # the worker dies here: nothing after this runs
            key = f"page-{n}.md"
            yield SourceItem(
                key=key, name=key, version="v1", origin=f"https://example.org/{key}", fetch=partial(self._fetch, key)
            )

    def _fetch(self, key: str) -> bytes:
        Flaky.fetched.append(key)
        return f"# {key}\n\nText of {key}.\n".encode()

    @property
    def cursor(self) -> str:
        return "v1"


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> type[Flaky]:
    monkeypatch.setitem(kinds.KINDS, "flaky", Flaky)
    Flaky.fail_after = Flaky.killed_after = None
    Flaky.fetched = []
    return Flaky


def test_a_source_error_mid_listing_stops_the_sync_and_archives_nothing(cast: Cast, flaky: type[Flaky]) -> None:
    source = source_create(by=cast.alice, name="Site", kind="flaky", config={}, collection=cast.handbook, sync=False)
    assert source_sync(source=source).created == 3
    flaky.fail_after = 1
    failed = source_sync(source=source)
    assert (failed.stage, failed.error) == ("failed", "The host stopped answering (connection reset).")
    assert Document.objects.filter(collection=cast.handbook, archived_at__isnull=True).count() == 3


def test_a_sync_killed_mid_way_resumes_without_duplicates(cast: Cast, flaky: type[Flaky], settings: Settings) -> None:
    source = source_create(by=cast.alice, name="Site", kind="flaky", config={}, collection=cast.handbook, sync=False)
    flaky.killed_after = 2
    sync, _ = sync_create(source=source)
    with pytest.raises(KeyboardInterrupt):
        sync_run(sync_id=sync.pk)
    sync.refresh_from_db()
    assert sync.stage == SyncStage.RUNNING and Document.objects.count() == 2
    # The worker is gone: once its heartbeat is older than the lease, beat's pass runs the sync again.
    SourceSync.objects.filter(pk=sync.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.CONNECTORS_SYNC_LEASE + 1)
    )
    flaky.killed_after = None
    assert sync_due_sources() == 1  # eager: the task ran in this process
    sync.refresh_from_db()
    assert (sync.stage, sync.seen, sync.created, sync.unchanged) == ("indexing", 3, 3, 0)
    assert Document.objects.count() == 3 and SyncedItem.objects.count() == 3
    assert flaky.fetched == ["page-0.md", "page-1.md", "page-2.md"], "each item fetched once"
