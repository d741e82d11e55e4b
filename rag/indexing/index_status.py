"""Where documents stand in the index, per embedding model: what is pending, indexed or failed.

Writers mark documents pending and claim them (`request_index`, `set_state`); readers count them: for
a viewer (`index_coverage`, rag.status), for an import waiting on its documents
(`documents_awaiting_index`) and for the metrics scrape (`IndexCollector`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from config.celery import app as celery_app
from documents.models import Document
from permissions.models import User
from rag.corpus.serving_model import configured_model, serving_model
from rag.indexing.model_switch import Coverage, coverage
from rag.models import Chunk, IndexState, IndexStatus

logger = logging.getLogger(__name__)

# Rapid edits coalesce: while a queued task has not started, further saves queue nothing. A
# status left pending longer than this (a lost message) no longer holds new requests back.
COALESCE_SECONDS = 300
# A task holds its documents in these states, beating while it works (`keep_alive`).
WORKING = [IndexState.CHUNKING, IndexState.EMBEDDING]
UNSETTLED = [IndexState.PENDING, *WORKING]


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


def mark_queued(*, document_ids: Iterable, sent_at: datetime) -> None:
    """A task reading these documents reached the broker, sent at `sent_at`: it covers what was pending by then.

    A document marked pending after the send began may be read by a task already running: it keeps
    waiting for a task of its own.
    """
    IndexStatus.objects.filter(
        document_id__in=list(document_ids), state=IndexState.PENDING, queued_at__isnull=True, updated_at__lte=sent_at
    ).update(queued_at=timezone.now())


def in_flight(*, lease: int, queue_empty: bool = False) -> Q:
    """Statuses a task holds, so no other pass queues them: pending with a task in the queue (however long
    the queue is), pending for less than `lease` seconds (its task being sent), or chunked or embedded by a
    task whose heartbeat is younger than `lease` seconds.

    With `queue_empty` (config.celery.queue_is_empty), a task queued more than a lease ago is no longer
    taken to be waiting: a worker took it and died before it could say so, or the broker lost it.
    """
    cutoff = timezone.now() - timedelta(seconds=lease)
    queued = Q(state=IndexState.PENDING, queued_at__isnull=False)
    if queue_empty:
        queued &= Q(queued_at__gte=cutoff)
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


def documents_awaiting_index(document_ids: list) -> int:
    """How many of these documents are not yet indexed at their current version (nor failed) for the configured model.

    Registered with documents.ingestion.jobs.register_index_probe (documents may not import rag). With
    RAG_ENABLED=false none: nothing indexes them until the feature is on again, so an import does not wait.
    """
    if not settings.RAG_ENABLED:
        return 0
    settled = IndexStatus.objects.filter(document_id__in=document_ids, model_id=settings.RAG_EMBEDDING_MODEL).filter(
        Q(state=IndexState.FAILED) | Q(state=IndexState.INDEXED, indexed_version__gte=F("document__version"))
    )
    return len(set(document_ids)) - settled.count()


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


def queue_length(queue: str) -> int:
    """Messages waiting in the broker's `queue` (kombu counts Redis' priority sub-queues too); raises if it is unreachable."""
    with celery_app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=0, timeout=2)
        return connection.default_channel.queue_declare(queue=queue, passive=True).message_count


class IndexCollector(Collector):
    """`cairn_index_documents{model,state}`, `cairn_queue_messages{queue}` and `cairn_broker_up`, computed at each scrape."""

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
        if settings.CELERY_TASK_ALWAYS_EAGER:
            return  # no broker: tasks run in-process and nothing waits
        queue = celery_app.conf.task_default_queue
        up = GaugeMetricFamily("cairn_broker_up", "1 when the scrape could read the broker's queue, else 0.")
        try:
            waiting = queue_length(queue)
        except Exception as exc:  # a scrape reports the broker down, it never fails for it
            logger.warning("metrics: cannot read the length of queue %s: %s", queue, exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        messages = GaugeMetricFamily(
            "cairn_queue_messages", "Tasks waiting in the broker's queue (indexing, imports, reconciliation).", labels=["queue"]
        )
        messages.add_metric([queue], waiting)
        yield messages
