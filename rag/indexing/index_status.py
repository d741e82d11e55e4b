"""Where documents stand in the index, per embedding model: what is pending, indexed or failed.

Writers mark documents pending and claim them (`request_index`, `set_state`); readers count them: for
a viewer (`index_coverage`, rag.status), for an import waiting on its documents
(`documents_awaiting_index`) and for the metrics scrape (`IndexCollector`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from documents.index_state import IndexState as DocumentIndexState
from documents.models import Document
from permissions.models import User
from rag.corpus.serving_model import configured_model, fallback_model, serving_model
from rag.indexing.model_switch import Coverage, coverage
from rag.models import Chunk, IndexState, IndexStatus

# Rapid edits coalesce: while a queued task has not started, further saves queue nothing. A
# status left pending longer than this (a lost message) no longer holds new requests back.
COALESCE_SECONDS = 300
# Indexing started or asked for, not finished.
WAITING = [IndexState.PENDING, IndexState.CHUNKING, IndexState.EMBEDDING]


def set_state(document_ids: Iterable, model_id: str, state: str, **fields) -> None:
    IndexStatus.objects.filter(document_id__in=list(document_ids), model_id=model_id).update(
        state=state, updated_at=timezone.now(), **fields
    )


def request_index(*, document_id, model_id: str) -> bool:
    """Mark the document pending; False when a task already queued will read its latest version.

    The database, not a per-process cache, holds the marker, so web processes and workers
    agree. A task claims its documents by moving them out of pending, so a save made while
    a task runs queues a fresh one.
    """
    now = timezone.now()
    status, created = IndexStatus.objects.get_or_create(
        document_id=document_id, model_id=model_id, defaults={"state": IndexState.PENDING, "updated_at": now}
    )
    if created:
        return True
    waiting = Q(state=IndexState.PENDING, updated_at__gt=now - timedelta(seconds=COALESCE_SECONDS))
    # A conditional update: of two concurrent requests only one sees the row leave `waiting`.
    return IndexStatus.objects.filter(pk=status.pk).exclude(waiting).update(state=IndexState.PENDING, updated_at=now) == 1


def mark_pending(*, document_ids: Iterable, model_id: str) -> None:
    for document_id in document_ids:
        IndexStatus.objects.update_or_create(
            document_id=document_id, model_id=model_id, defaults={"state": IndexState.PENDING, "updated_at": timezone.now()}
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


def document_index_state(document: Document) -> DocumentIndexState | None:
    """Whether the document's current version is in the index of the configured model (as `documents_awaiting_index`
    asks for an import): registered with documents.index_state for the document page. None with RAG_ENABLED=false."""
    if not settings.RAG_ENABLED:
        return None
    status = IndexStatus.objects.filter(document_id=document.pk, model_id=settings.RAG_EMBEDDING_MODEL).first()
    if status is not None and status.state == IndexState.INDEXED and (status.indexed_version or 0) >= document.version:
        return "indexed"
    if status is not None and status.state == IndexState.FAILED:
        return "failed"
    return "pending"


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
        IndexStatus.objects.filter(model_id=model_id, state__in=WAITING, document__deleted_at__isnull=True)
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
