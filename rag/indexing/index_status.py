"""Where documents stand in the index, per embedding model: what is pending, indexed or failed.

Writers mark documents pending and claim them (`request_index`, `set_state`); readers count them: for
a viewer (`index_coverage`, rag.status), for an import waiting on its documents
(`index_progress`) and for the metrics scrape (`IndexCollector`); and show them, document by
document, on the document lists (`document_index_states`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.db.models import Count, F, Func, IntegerField, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from documents.index_state import IndexState as PageIndexState
from documents.ingestion.jobs import IndexProgress
from documents.models import Document
from permissions.models import User
from rag.corpus.serving_model import configured_model, fallback_model, serving_model
from rag.indexing.model_switch import Coverage, coverage
from rag.models import Chunk, IndexState, IndexStatus

# Rapid edits coalesce: while a queued task has not started, further saves queue nothing. A
# status left pending longer than this (a lost message) no longer holds new requests back.
COALESCE_SECONDS = 300
# A task holds its documents in these states, beating while it works (`keep_alive`).
WORKING = [IndexState.CHUNKING, IndexState.EMBEDDING]
UNSETTLED = [IndexState.PENDING, *WORKING]


# A first guess of the bytes of text per passage, until a document of the set is indexed (`index_progress`):
# about 4 bytes per word piece, passages as long as the chunk size or the local model's 256-token window.
def first_guess_bytes_per_chunk() -> int:
    return min(settings.RAG_CHUNK_SIZE, 256) * 4


class OctetLength(Func):
    """A text's length in bytes: PostgreSQL reads it from the value's header, without reading the text."""

    function = "octet_length"
    output_field = IntegerField()


def set_state(document_ids: Iterable, model_id: str, state: str, **fields) -> None:
    IndexStatus.objects.filter(document_id__in=list(document_ids), model_id=model_id).update(
        state=state, updated_at=timezone.now(), **fields
    )


def request_index(*, document_id, model_id: str) -> bool:
    """Mark the document pending; False when a task already queued will read its latest version.

    The database, not a per-process cache, holds the marker, so web processes and workers
    agree. A task claims its documents by moving them out of pending, so a save made while
    a task runs queues a fresh one; so does one made while the last request never reached the broker.
    """
    now = timezone.now()
    status, created = IndexStatus.objects.get_or_create(
        document_id=document_id, model_id=model_id, defaults={"state": IndexState.PENDING, "updated_at": now}
    )
    if created:
        return True
    waiting = Q(state=IndexState.PENDING, queued_at__isnull=False, updated_at__gt=now - timedelta(seconds=COALESCE_SECONDS))
    # A conditional update: of two concurrent requests only one sees the row leave `waiting`.
    updated = (
        IndexStatus.objects.filter(pk=status.pk).exclude(waiting).update(state=IndexState.PENDING, updated_at=now, queued_at=None)
    )
    return updated == 1


def mark_pending(*, document_ids: Iterable, model_id: str) -> None:
    """These documents wait for a task that is about to be queued (`mark_queued` once it is)."""
    now = timezone.now()
    IndexStatus.objects.bulk_create(
        [
            IndexStatus(document_id=pk, model_id=model_id, state=IndexState.PENDING, updated_at=now)
            for pk in dict.fromkeys(document_ids)
        ],
        update_conflicts=True,
        unique_fields=["document", "model_id"],
        update_fields=["state", "updated_at", "queued_at"],
    )


def mark_queued(*, document_ids: Iterable, sent_at: datetime, queue: str) -> None:
    """A task reading these documents reached the broker's `queue`, sent at `sent_at`: it covers what was pending
    by then.

    A document marked pending after the send began may be read by a task already running: it keeps
    waiting for a task of its own.
    """
    IndexStatus.objects.filter(
        document_id__in=list(document_ids), state=IndexState.PENDING, queued_at__isnull=True, updated_at__lte=sent_at
    ).update(queued_at=timezone.now(), queue=queue)


def lost_from(*, lease: int, empty_queues: Collection[str], through: str = "") -> Q:
    """Pending statuses whose task was queued more than `lease` seconds ago in a queue now empty
    (config.celery.empty_queues): a worker took it and died before it could say so, or the broker lost it.
    `through`: the lookup that leads from the queried model to its status ("status__" from a document)."""
    cutoff = timezone.now() - timedelta(seconds=lease)
    return Q(
        **{
            f"{through}state": IndexState.PENDING,
            f"{through}queued_at__lt": cutoff,
            f"{through}queue__in": list(empty_queues),
        }
    )


def in_flight(*, lease: int, empty_queues: Collection[str] = ()) -> Q:
    """Statuses a task holds, so no other pass queues them: pending with a task in the queue (however long
    the queue is), pending for less than `lease` seconds (its task being sent), or chunked or embedded by a
    task whose heartbeat is younger than `lease` seconds. A task queued a lease ago in one of `empty_queues`
    is no longer taken to be waiting (`lost_from`).
    """
    cutoff = timezone.now() - timedelta(seconds=lease)
    queued = Q(state=IndexState.PENDING, queued_at__isnull=False)
    if empty_queues:
        queued &= ~lost_from(lease=lease, empty_queues=empty_queues)
    return queued | Q(state__in=UNSETTLED, updated_at__gte=cutoff)


def keep_alive(*, document_ids: Iterable, model_id: str) -> None:
    """The heartbeat of a task chunking or embedding these documents (see `in_flight`)."""
    IndexStatus.objects.filter(document_id__in=list(document_ids), model_id=model_id, state__in=WORKING).update(
        updated_at=timezone.now()
    )


def release(*, document_ids: Iterable) -> None:
    """A task that will run again later (a retry) lets go of these documents: pending, its message not yet sent."""
    IndexStatus.objects.filter(document_id__in=list(document_ids), state__in=UNSETTLED).update(
        state=IndexState.PENDING, updated_at=timezone.now(), queued_at=None
    )


def give_up(*, document_ids: Iterable, reason: str) -> None:
    """A task failed for good: its documents still waiting for it are failed with the reason (reconciliation retries them)."""
    IndexStatus.objects.filter(document_id__in=list(document_ids), state__in=UNSETTLED).update(
        state=IndexState.FAILED, updated_at=timezone.now(), error=reason[:2000]
    )


@dataclass(frozen=True)
class IndexCoverage:
    model: str
    documents: int
    indexed: int
    pending: int
    failed: int
    chunks: int
    # While the team is searched with an earlier model: how far the configured one has come (else None).
    backfill: Coverage | None = None


def index_coverage(*, user: User) -> IndexCoverage:
    """Coverage of the documents the caller can see, for the model their searches use (and the one being built)."""
    model_id = serving_model(user.team_id).model_id
    visible = Document.objects.visible_to(user, include_archived=True)
    states = IndexStatus.objects.filter(document__in=visible, model_id=model_id).aggregate(
        indexed=Count("id", filter=Q(state=IndexState.INDEXED)),
        failed=Count("id", filter=Q(state=IndexState.FAILED)),
    )
    total = visible.count()
    backfill = coverage(visible, old=model_id) if model_id != configured_model().model_id else None
    return IndexCoverage(
        model=model_id,
        documents=total,
        indexed=states["indexed"],
        pending=total - states["indexed"] - states["failed"],
        failed=states["failed"],
        chunks=Chunk.objects.filter(document__in=visible, model_id=model_id).count(),
        backfill=backfill,
    )


@dataclass(frozen=True)
class DocumentIndexState:
    """Where one document stands in the index its reader's searches use."""

    state: str  # "indexed", "pending" or "failed"
    reason: str  # why it is pending or failed: the stage it is at, or the indexing's error


def document_index_states(*, user: User, document_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, DocumentIndexState]:
    """The state of each of these documents that `user` may read (the others are left out), for the model their
    searches use: indexed at its current version, pending (chunking and embedding count as pending), or failed."""
    model_id = serving_model(user.team_id).model_id
    versions = dict(
        Document.objects.visible_to(user, include_archived=True).filter(pk__in=list(document_ids)).values_list("pk", "version")
    )
    rows = IndexStatus.objects.filter(document_id__in=list(versions), model_id=model_id).values_list(
        "document_id", "state", "indexed_version", "error"
    )
    found = {document_id: (state, indexed_version, error) for document_id, state, indexed_version, error in rows}
    return {pk: _classified(found.get(pk), version) for pk, version in versions.items()}


def _classified(status: tuple[str, int | None, str] | None, version: int) -> DocumentIndexState:
    """A document at `version` whose index status is (state, indexed version, error), or None if it has none yet."""
    if status is None:
        return DocumentIndexState("pending", "not indexed yet")
    state, indexed_version, error = status
    if state == IndexState.FAILED:
        return DocumentIndexState("failed", error or "indexing failed without a reason recorded")
    if state == IndexState.INDEXED and (indexed_version or 0) >= version:
        return DocumentIndexState("indexed", "")
    if state == IndexState.INDEXED:
        return DocumentIndexState("pending", f"version {version} waits to be indexed")
    if state == IndexState.PENDING:
        return DocumentIndexState("pending", "waiting to be indexed")
    return DocumentIndexState("pending", f"being indexed ({state})")


def documents_awaiting_index(document_ids: list) -> int:
    """How many of these documents are not yet indexed at their current version (nor failed) for the configured model."""
    return index_progress(document_ids).waiting


def index_progress(document_ids: list) -> IndexProgress:
    """How far the configured model's index has come with these documents: documents still waiting, passages
    indexed at their current version, the passages there will be, and the time left at the rate seen so far.

    Registered with documents.ingestion.jobs.register_index_probe (documents may not import rag). A handful of
    aggregates over narrow rows, whatever the number of documents: the statuses' chunk counts (written with each
    swap, no write per chunk) and the texts' byte lengths (read from the TOAST header, no text is read). A
    document not indexed yet is estimated at the bytes per passage of those already indexed (at first, a
    guess from the chunk size). With RAG_ENABLED=false none waits: nothing indexes them until the feature is
    on again, so an import does not wait.
    """
    if not settings.RAG_ENABLED:
        return IndexProgress(waiting=0, chunks_embedded=0, chunks_total=0, eta_seconds=None)
    ids = set(document_ids)
    statuses = IndexStatus.objects.filter(document_id__in=ids, model_id=settings.RAG_EMBEDDING_MODEL)
    current = Q(state=IndexState.INDEXED, indexed_version__gte=F("document__version"))
    done = statuses.aggregate(
        indexed=Count("id", filter=current),
        failed=Count("id", filter=Q(state=IndexState.FAILED)),
        chunks=Coalesce(Sum("chunk_count", filter=current), 0),
        size=Coalesce(Sum(OctetLength("document__text"), filter=current), 0),
        first=Min("updated_at", filter=current),
    )
    settled = statuses.filter(current | Q(state=IndexState.FAILED)).values("document_id")
    waiting = (
        Document.objects.filter(pk__in=ids)
        .exclude(pk__in=settled)
        .annotate(bytes=OctetLength("text"))
        .aggregate(size=Coalesce(Sum("bytes"), 0), with_text=Count("id", filter=Q(bytes__gt=0)))
    )
    bytes_per_chunk = done["size"] / done["chunks"] if done["chunks"] and done["size"] else first_guess_bytes_per_chunk()
    # At least a passage for each document with text in it.
    expected = max(waiting["with_text"], round(waiting["size"] / bytes_per_chunk))
    return IndexProgress(
        waiting=len(ids) - done["indexed"] - done["failed"],
        chunks_embedded=done["chunks"],
        chunks_total=done["chunks"] + expected,
        eta_seconds=_eta(statuses.filter(current), done["chunks"], expected, first=done["first"]),
    )


def _eta(indexed: QuerySet[IndexStatus], chunks: int, left: int, *, first: datetime | None) -> int | None:
    """Seconds until `left` more passages are indexed, at the rate the `chunks` of the `indexed` statuses took
    since the first of them was indexed (its own passages came before); None until a second one is."""
    if not left:
        return 0
    if first is None:
        return None
    earliest = indexed.order_by("updated_at").values_list("chunk_count", flat=True).first() or 0
    seconds = (timezone.now() - first).total_seconds()
    if chunks <= earliest or seconds <= 0:
        return None
    return max(1, math.ceil(left * seconds / (chunks - earliest)))


def document_index_state(document: Document) -> PageIndexState | None:
    """Where the document's current version stands in the index its team's searches use, as the lists say
    (`document_index_states`): registered with documents.index_state for the document page. None with RAG_ENABLED=false."""
    if not settings.RAG_ENABLED:
        return None
    model_id = serving_model(document.team_id).model_id
    status = (
        IndexStatus.objects.filter(document_id=document.pk, model_id=model_id)
        .values_list("state", "indexed_version", "error")
        .first()
    )
    return cast(PageIndexState, _classified(status, document.version).state)


def index_state_counts(model_id: str) -> dict[str, int]:
    """Documents (not deleted) in each index state of `model_id`, every state present."""
    counts = dict.fromkeys(IndexState.values, 0)
    rows = (
        IndexStatus.objects.filter(model_id=model_id, document__deleted_at__isnull=True)
        .values_list("state")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts.update(dict(rows))
    return counts


def oldest_waiting_seconds(model_id: str) -> float:
    """Seconds since the longest-waiting unfinished indexing of `model_id` (pending, chunking, embedding) last moved; 0 when none waits."""
    oldest = (
        IndexStatus.objects.filter(model_id=model_id, state__in=UNSETTLED, document__deleted_at__isnull=True)
        .order_by()
        .aggregate(oldest=Min("updated_at"))["oldest"]
    )
    return max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else 0.0


def fallback_document_count() -> int:
    """Live documents the fallback model has indexed, waiting to be embedded again by the configured one."""
    model = fallback_model()
    if model is None:
        return 0
    return IndexStatus.objects.filter(
        model_id=model.model_id, state=IndexState.INDEXED, document__deleted_at__isnull=True
    ).count()


class IndexCollector(Collector):
    """`cairn_index_documents{model,state}`, `cairn_index_oldest_waiting_seconds{model}` and
    `cairn_index_fallback_documents`, computed at each scrape."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        model_id = settings.RAG_EMBEDDING_MODEL
        documents = GaugeMetricFamily(
            "cairn_index_documents",
            "Documents in each index state for the configured embedding model.",
            labels=["model", "state"],
        )
        for state, count in index_state_counts(model_id).items():
            documents.add_metric([model_id, state], count)
        yield documents
        oldest = GaugeMetricFamily(
            "cairn_index_oldest_waiting_seconds",
            "Seconds the longest-waiting unfinished indexing (pending, chunking, embedding) of the configured model has not moved; 0 when none waits.",
            labels=["model"],
        )
        oldest.add_metric([model_id], oldest_waiting_seconds(model_id))
        yield oldest
        yield GaugeMetricFamily(
            "cairn_index_fallback_documents",
            "Documents the fallback embedding model indexed while the configured one failed, not yet embedded again by it.",
            value=fallback_document_count(),
        )
