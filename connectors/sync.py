"""The sync: a source's items in, its collection's documents kept equal to them.

Each item the connector yields is compared with what the last sync stored for its key
(`SyncedItem`): an equal `version` costs no fetch, no parse and no embedding; a new or changed item is
fetched, parsed with the import parsers (documents.ingestion) and becomes a document or a new version of
its document through the documents services, which queue its indexing. A key the source no longer yields
archives its document (restorable; restored when the key comes back); nothing is ever deleted.

- A `SourceError` (the source unreachable, bad credentials, the owner no longer allowed to write the
  collection) stops the sync with its message; nothing is archived.
- An `ItemError` (or a file the parsers refuse) fails that item alone, recorded in the sync's errors.
- Each item's record is written in the same transaction as its document, so a sync killed mid-way
  resumes on the next run without duplicates, counting what it had written once.
- One sync per source at a time: a partial unique index on in-flight syncs, and a conditional claim.

Registering a kind: write a class with the `connectors.base.Connector` protocol (a `kind` name,
`from_config(config, secrets)` raising SourceError on a bad field, `items(previous)`, `cursor`;
optionally `label`, `fields` and `secret_fields` for the Sources page) in `connectors/kinds/<name>.py`
and add one line to `KINDS` in `connectors/kinds/__init__.py`.

Running a sync in a test:

    source = source_create(by=alice, name="Wiki", kind="folder", config={...}, collection=collection)
    sync = source_sync(source=source)          # runs in this process, returns the finished SourceSync
    assert (sync.created, sync.changed, sync.deleted) == (3, 0, 0)

(`source_create` lives in connectors.services; with CELERY_TASK_ALWAYS_EAGER it also runs a first sync
when the source is created, so pass `sync=False` to count the first sync yourself.) The Celery task is
`connectors.tasks.sync_source_task(sync_id)`, on the bulk queue; beat's `sync_due_sources_task` queues
the sources whose schedule is due and runs again the syncs a dead worker left behind.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.celery import TRANSIENT_ERRORS
from connectors.base import Connector, ItemError, PreviousItem, SourceError, SourceItem
from connectors.kinds import connector_class
from connectors.models import IN_FLIGHT, ItemOutcome, SourceState, SourceSync, SyncedItem, SyncedSource, SyncStage, SyncTrigger
from connectors.secrets import SecretsUnreadable, decrypt_secrets
from documents import services
from documents.ingestion.detect import ARCHIVE, detect
from documents.ingestion.errors import FileRejected, size_text
from documents.ingestion.jobs import IndexProgress, index_progress
from documents.ingestion.parsers import Parsed, parse
from documents.models import Collection, Document
from documents.signals import bulk_changes
from permissions.policy import can_write_collection

logger = logging.getLogger("connectors.sync")

# At most this many item errors are kept on a sync (the count of failures is exact).
MAX_ERRORS = 200
# How often a running sync writes its counters, for the Sources page and sources.info.
PROGRESS_INTERVAL = 0.5

UNCHANGED = "unchanged"
FAILED = "failed"


def connector_for(source: SyncedSource) -> Connector:
    """The source's connector, built from its configuration and decrypted secrets; raises SourceError."""
    config = dict(source.config)
    if source.archive:
        config["archive"] = source.archive
    try:
        secrets = decrypt_secrets(source.secrets)
    except SecretsUnreadable as exc:
        raise SourceError(str(exc)) from exc
    return connector_class(source.kind).from_config(config, secrets)


def check_owner_may_write(source: SyncedSource) -> Collection:
    """The collection the source writes into, when its owner may still write it; SourceError otherwise."""
    owner = source.owner
    if owner is None or not owner.is_active or owner.team_id != source.team_id:
        raise SourceError(
            "The source's owner is no longer a member of the team; a team admin can take the source over by editing it."
        )
    collection = Collection.objects.filter(pk=source.collection_id, deleted_at__isnull=True).first()
    if collection is None:
        raise SourceError("The source's collection has been deleted; choose another collection for it.")
    if not can_write_collection(owner, collection):
        raise SourceError(
            f"The source's owner ({owner.get_username()}) can no longer write to the collection “{collection.name}”, "
            "so nothing was synced. Give them write access again, or choose a collection they can write."
        )
    return collection


def sync_create(*, source: SyncedSource, trigger: str = SyncTrigger.MANUAL) -> tuple[SourceSync, bool]:
    """A queued sync of the source, or the one already in flight; True when it is new."""
    try:
        with transaction.atomic():
            return SourceSync.objects.create(source=source, trigger=trigger), True
    except IntegrityError:
        # The partial unique index: another sync of this source is queued or running.
        in_flight = SourceSync.objects.filter(source=source, stage__in=IN_FLIGHT).first()
        if in_flight is None:  # it finished in between
            return sync_create(source=source, trigger=trigger)
        return in_flight, False


def source_sync(*, source: SyncedSource, trigger: str = SyncTrigger.MANUAL) -> SourceSync:
    """Sync the source now, in this process, and return the sync (finished, or the one another worker runs)."""
    sync, _ = sync_create(source=source, trigger=trigger)
    sync_run(sync_id=sync.pk)
    sync.refresh_from_db()
    return sync


def _abandoned(cutoff: datetime) -> Q:
    return Q(stage=SyncStage.RUNNING) & (Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))


def sync_claim(*, sync_id: uuid.UUID | str) -> SourceSync | None:
    """Move a queued sync to running (or take over one a dead worker left running); None when another holds it.

    The update is conditional, so of two deliveries of the same task only one runs the sync.
    """
    now = timezone.now()
    claimed = (
        SourceSync.objects.filter(pk=sync_id)
        .filter(Q(stage=SyncStage.QUEUED) | _abandoned(now - timedelta(seconds=settings.CONNECTORS_SYNC_LEASE)))
        .update(stage=SyncStage.RUNNING, started_at=Coalesce(F("started_at"), Value(now)), heartbeat_at=now)
    )
    if claimed != 1:
        return None
    return SourceSync.objects.select_related("source", "source__owner", "source__collection").get(pk=sync_id)


def sync_run(*, sync_id: uuid.UUID | str) -> SourceSync | None:
    """The worker's side of a sync: claim it, check the owner's access, list the source, write what changed."""
    sync = sync_claim(sync_id=sync_id)
    if sync is None:
        return None
    source = sync.source
    try:
        collection = check_owner_may_write(source)
        connector = connector_for(source)
        _run(sync, source, collection, connector)
    except SourceError as exc:
        sync_fail(sync_id=sync.pk, reason=exc.message)
    return sync


@dataclass
class _Known:
    record: SyncedItem
    document_alive: bool
    document_archived: bool


@bulk_changes()  # a sync's documents are indexed from the bulk queue, behind any edit
def _run(sync: SourceSync, source: SyncedSource, collection: Collection, connector: Connector) -> None:
    known = _known(source)
    previous = {key: PreviousItem(version=k.record.version, state=k.record.state) for key, k in known.items()}
    sync.seen = sync.created = sync.changed = sync.unchanged = sync.deleted = sync.failed = 0
    sync.errors = []
    seen: set[str] = set()
    last_write = time.monotonic()
    for item in connector.items(previous):
        if item.key in seen:
            continue  # a connector that lists a key twice: the first one counts
        seen.add(item.key)
        sync.seen += 1
        outcome, message = _sync_item(sync, source, collection, item, known.get(item.key))
        if outcome == FAILED:
            sync.failed += 1
            if len(sync.errors) < MAX_ERRORS:
                sync.errors.append({"key": item.key[:2048], "message": message})
        elif outcome == ItemOutcome.CREATED:
            sync.created += 1
        elif outcome == ItemOutcome.CHANGED:
            sync.changed += 1
        else:
            sync.unchanged += 1
        if time.monotonic() - last_write > PROGRESS_INTERVAL:
            _save_progress(sync)
            last_write = time.monotonic()
    # Only once the listing is complete: a connector that could not finish raised SourceError above.
    for key, entry in known.items():
        if key not in seen and entry.record.gone_at is None:
            _archive(entry)
            sync.deleted += 1
    sync.cursor = connector.cursor[:500]
    _finish(sync, source)


def _known(source: SyncedSource) -> dict[str, _Known]:
    records = SyncedItem.objects.filter(source=source).select_related("document").only(
        "key", "version", "state", "document_id", "written_by_id", "outcome", "gone_at",
        "document__archived_at", "document__deleted_at",
    )  # fmt: skip
    known = {}
    for record in records:
        document = record.document
        alive = document is not None and document.deleted_at is None
        known[record.key] = _Known(record, alive, alive and document is not None and document.archived_at is not None)
    return known


def _sync_item(
    sync: SourceSync, source: SyncedSource, collection: Collection, item: SourceItem, known: _Known | None
) -> tuple[str, str]:
    """What became of one item: (created | changed | unchanged | failed, the failure's message)."""
    if known is not None and known.record.written_by_id == sync.pk:
        return known.record.outcome, ""  # written by this sync before it was killed: counted once
    if known is not None and known.record.version == item.version and known.document_alive:
        if known.record.gone_at is None and not known.document_archived:
            return UNCHANGED, ""
        _restore(sync, known)  # back at the source as it was: no fetch, no parse
        return ItemOutcome.CHANGED, ""
    try:
        parsed = _read(item)
        return _write(sync, source, collection, item, parsed, known), ""
    except ItemError as exc:
        return FAILED, exc.message
    except FileRejected as exc:
        return FAILED, exc.reason
    except (SourceError, SoftTimeLimitExceeded, *TRANSIENT_ERRORS):
        raise  # the whole source, the sync's time or the database: not this item's fault
    except Exception as exc:
        # No traceback in the log: a connector's exception may quote a URL or a header carrying a secret.
        logger.error("sync %s of source %s: item %s failed: %s", sync.pk, source.pk, item.key, type(exc).__name__)
        return FAILED, f"Unexpected error while reading this item: {type(exc).__name__}."


def _too_large() -> str:
    return f"The file is larger than the {size_text(settings.IMPORT_MAX_FILE_SIZE)} limit per file."


def _read(item: SourceItem) -> Parsed:
    limit = settings.IMPORT_MAX_FILE_SIZE
    if item.size is not None and item.size > limit:
        raise ItemError(item.key, _too_large())  # refused before a byte is read
    data = item.fetch()
    if len(data) > limit:
        raise ItemError(item.key, _too_large())
    detected = detect(item.name, data)
    if detected.format == ARCHIVE:
        raise FileRejected("Archives inside a source are not expanded.")
    parsed = parse(item.name, data, detected)
    if len(parsed.text) > settings.DOCUMENT_MAX_TEXT_LENGTH:
        raise FileRejected(f"The text is longer than the {settings.DOCUMENT_MAX_TEXT_LENGTH:,} characters a document may hold.")
    return parsed


@transaction.atomic
def _write(
    sync: SourceSync, source: SyncedSource, collection: Collection, item: SourceItem, parsed: Parsed, known: _Known | None
) -> str:
    """Create or update the item's document and save its record with it, in one transaction."""
    title = (item.title or parsed.title).strip()[:500] or item.name[:500]
    document = None
    if known is not None and known.document_alive:
        document = _live_document(known.record)
    if document is None:
        document = services.document_create(
            by=source.owner,
            collection=collection,
            title=title,
            text=parsed.text,
            publish=source.publish,
            tags=parsed.tags or [],
            origin=item.origin[:2048],
        )
        outcome = ItemOutcome.CREATED
    else:
        if document.archived_at is not None:
            document = services.document_unarchive(document=document)
        document = services.document_update(
            document=document,
            by=source.owner,
            title=title,
            text=parsed.text,
            publish=source.publish,
            tags=parsed.tags,
            origin=item.origin[:2048],
        )
        outcome = ItemOutcome.CHANGED
    SyncedItem.objects.update_or_create(
        source=source,
        key=item.key,
        defaults={
            "version": item.version[:200],
            "origin": item.origin[:2048],
            "document": document,
            "state": dict(item.state),
            "links": list(item.links),
            "written_by": sync,
            "outcome": outcome,
            "gone_at": None,
            "synced_at": timezone.now(),
        },
    )
    return outcome


def _live_document(record: SyncedItem) -> Document | None:
    if record.document_id is None:
        return None
    return Document.objects.filter(pk=record.document_id, deleted_at__isnull=True).first()


@transaction.atomic
def _restore(sync: SourceSync, known: _Known) -> None:
    document = _live_document(known.record)
    if document is not None:
        services.document_unarchive(document=document)
    SyncedItem.objects.filter(pk=known.record.pk).update(
        gone_at=None, written_by=sync, outcome=ItemOutcome.CHANGED, synced_at=timezone.now()
    )


@transaction.atomic
def _archive(known: _Known) -> None:
    """The key is gone from the source: its document is archived (restorable), never deleted."""
    document = _live_document(known.record)
    if document is not None:
        services.document_archive(document=document)
    SyncedItem.objects.filter(pk=known.record.pk).update(gone_at=timezone.now())


_COUNTERS = ("seen", "created", "changed", "unchanged", "deleted", "failed", "errors")


def _save_progress(sync: SourceSync) -> None:
    SourceSync.objects.filter(pk=sync.pk).update(heartbeat_at=timezone.now(), **{name: getattr(sync, name) for name in _COUNTERS})


def _finish(sync: SourceSync, source: SyncedSource) -> None:
    now = timezone.now()
    wrote = SyncedItem.objects.filter(written_by=sync, outcome__in=list(ItemOutcome)).exclude(document=None).exists()
    sync.stage = SyncStage.INDEXING if wrote else SyncStage.DONE
    sync.finished_at = None if wrote else now
    SourceSync.objects.filter(pk=sync.pk, stage=SyncStage.RUNNING).update(
        stage=sync.stage, finished_at=sync.finished_at, cursor=sync.cursor, heartbeat_at=now,
        **{name: getattr(sync, name) for name in _COUNTERS},
    )  # fmt: skip
    SyncedSource.objects.filter(pk=source.pk).update(cursor=sync.cursor, last_sync=sync, next_sync_at=_next_sync(source, now))


def _next_sync(source: SyncedSource, now: datetime) -> datetime | None:
    if source.interval_minutes <= 0:
        return None
    return now + timedelta(minutes=source.interval_minutes)


def sync_fail(*, sync_id: uuid.UUID | str, reason: str) -> None:
    """The sync as a whole stopped: its reason kept; the documents it wrote before stay, nothing is archived."""
    now = timezone.now()
    sync = SourceSync.objects.filter(pk=sync_id).select_related("source").first()
    if sync is None:
        return
    failed = SourceSync.objects.filter(pk=sync_id, stage__in=[*IN_FLIGHT]).update(
        stage=SyncStage.FAILED, error=reason[:2000], finished_at=now
    )
    if failed:
        SyncedSource.objects.filter(pk=sync.source_id).update(last_sync=sync, next_sync_at=_next_sync(sync.source, now))


def sync_refresh(sync: SourceSync) -> SourceSync:
    """A sync in `indexing` becomes `done` once the documents it wrote are indexed; `sync.index_progress` says how far."""
    sync.index_progress = None  # type: ignore[attr-defined]  # a reading for sources.info, no field of the model
    if sync.stage not in (SyncStage.RUNNING, SyncStage.INDEXING):
        return sync
    document_ids = list(
        SyncedItem.objects.filter(written_by=sync, document__deleted_at__isnull=True)
        .exclude(document=None)
        .values_list("document_id", flat=True)
    )
    progress: IndexProgress | None = index_progress(document_ids)
    if sync.stage == SyncStage.RUNNING or (progress is not None and progress.waiting):
        sync.index_progress = progress  # type: ignore[attr-defined]
        return sync
    now = timezone.now()
    SourceSync.objects.filter(pk=sync.pk, stage=SyncStage.INDEXING).update(stage=SyncStage.DONE, finished_at=now)
    sync.stage, sync.finished_at = SyncStage.DONE, now
    return sync


def sync_beat(*, sync_id: uuid.UUID | str) -> None:
    """The heartbeat of the worker running the sync."""
    SourceSync.objects.filter(pk=sync_id, stage=SyncStage.RUNNING).update(heartbeat_at=timezone.now())


def sync_enqueued(*, sync_id: uuid.UUID | str) -> None:
    SourceSync.objects.filter(pk=sync_id, stage=SyncStage.QUEUED).update(enqueued_at=timezone.now())


def sync_release(*, sync_id: uuid.UUID | str) -> None:
    """The worker lets go of the sync to run it again later (a retry): queued, its task not yet sent."""
    SourceSync.objects.filter(pk=sync_id, stage=SyncStage.RUNNING).update(
        stage=SyncStage.QUEUED, enqueued_at=None, heartbeat_at=None
    )


def syncs_stalled(*, lease: int, queue_empty: bool = False) -> list[uuid.UUID]:
    """Syncs no task will run: queued but never sent (or sent a lease ago to a queue now empty), or running unbeaten."""
    cutoff = timezone.now() - timedelta(seconds=lease)
    unsent = Q(enqueued_at__isnull=True)
    if queue_empty:
        unsent |= Q(enqueued_at__lt=cutoff)
    stalled = (Q(stage=SyncStage.QUEUED, created_at__lt=cutoff) & unsent) | _abandoned(cutoff)
    ids = SourceSync.objects.filter(stalled).order_by("created_at").values_list("pk", flat=True)
    # A stalled running sync is queued again (the claim takes over an abandoned one).
    SourceSync.objects.filter(pk__in=list(ids)).filter(_abandoned(cutoff)).update(stage=SyncStage.QUEUED, enqueued_at=None)
    return list(ids)


def sources_due(*, now: datetime | None = None) -> list[SyncedSource]:
    """Active sources whose schedule is due and that have no sync in flight."""
    now = now or timezone.now()
    busy = SourceSync.objects.filter(stage__in=IN_FLIGHT).values("source_id")
    return list(
        SyncedSource.objects.filter(state=SourceState.ACTIVE, interval_minutes__gt=0, next_sync_at__lte=now)
        .exclude(pk__in=busy)
        .order_by("next_sync_at")
    )


def sync_summary(sync: SourceSync) -> dict[str, Any]:
    """The counts of a sync, for logs and tests."""
    return {name: getattr(sync, name) for name in ("seen", "created", "changed", "unchanged", "deleted", "failed")}
