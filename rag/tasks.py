"""Celery tasks and the functions that enqueue them. Tasks take ids and call one service.

Idempotent, so a redelivered task is harmless.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from celery import shared_task
from django.conf import settings

from permissions.models import User
from rag.indexing.backfill import backfill_start, backfill_step
from rag.indexing.fallback import reembed_fallback_documents
from rag.indexing.index_status import mark_pending, request_index
from rag.indexing.jobs import job_record
from rag.indexing.pipeline import index_with_serving_models, remove_document_chunks
from rag.indexing.reconcile import ReconcileReport, reconcile, stuck
from rag.models import IndexJob

# Documents per queued indexing task: enough for full embedding batches, few enough that a
# redelivered task repeats little.
REINDEX_BATCH = 32


@shared_task(acks_late=True, reject_on_worker_lost=True)
def index_document_task(document_id: str, force: bool = False) -> dict:
    result = index_with_serving_models(document_ids=[document_id], force=force)
    return {"indexed": len(result.indexed), "failed": len(result.failed)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def index_batch_task(document_ids: list[str], job_id: str | None = None, force: bool = False) -> dict:
    result = index_with_serving_models(document_ids=document_ids, force=force)
    if job_id:
        job_record(job_id=job_id, done=len(document_ids) - len(result.failed), failed=len(result.failed))
    return {"indexed": len(result.indexed), "failed": len(result.failed)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def remove_document_task(document_id: str) -> None:
    remove_document_chunks(document_ids=[document_id])


# The two passes beat runs (and a starting worker, the first): with RAG_ENABLED=false they do nothing,
# so documents saved meanwhile wait; the first reconciliation after the switch is on again indexes them.


@shared_task(acks_late=True, reject_on_worker_lost=True)
def backfill_task(job_id: str) -> bool:
    """One step of a backfill; it queues the next itself, so the job feeds itself one batch at a time."""
    more = backfill_step(job_id=job_id)
    if more:
        _next_backfill_step(job_id)
    return more


def _next_backfill_step(job_id: str) -> None:
    if backfill_task.app.conf.task_always_eager:
        # In-process (no broker): a loop, not one nested call per step.
        while backfill_step(job_id=job_id):
            pass
    else:
        backfill_task.delay(job_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reconcile_index_task() -> dict:
    """At worker start and every RAG_RECONCILE_INTERVAL: start (or restart) a backfill a model change needs, then repair."""
    if not settings.RAG_ENABLED:
        return {}
    start_backfill()
    report = reconcile()
    repair_index(report)
    return report.counts()


def start_backfill(*, by: User | None = None) -> IndexJob | None:
    """Start the backfill of the configured model if a team still waits for it (or restart a stalled one); its job."""
    start = backfill_start(by=by)
    if start is None:
        return None
    if start.needs_step:
        _next_backfill_step(str(start.job.pk))
    return start.job


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reembed_fallback_task() -> dict:
    """Embed again with the configured model what the fallback model embedded (beat, every RAG_EMBEDDING_FALLBACK_RETRY_INTERVAL)."""
    if not settings.RAG_ENABLED:
        return {}
    result = reembed_fallback_documents()
    return {"reembedded": result.reembedded, "failed": result.failed, "left": result.left}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def recover_index_task() -> int:
    """Queue again what a dead process left unindexed (run by beat every RAG_RECOVER_INTERVAL seconds)."""
    if not settings.RAG_ENABLED:
        return 0
    return recover_index(lease=settings.RAG_INDEX_LEASE)


def recover_index(*, lease: int) -> int:
    """Queue the documents `stuck` finds, marked pending so the lease starts again; how many were queued."""
    document_ids = stuck(lease=lease)
    mark_pending(document_ids=document_ids, model_id=settings.RAG_EMBEDDING_MODEL)
    return enqueue_reindex(document_ids, force=False)


def enqueue_index(document_id: uuid.UUID | str, *, force: bool = False) -> None:
    """Queue indexing of one document unless a queued task will already pick up its latest version."""
    if request_index(document_id=document_id, model_id=settings.RAG_EMBEDDING_MODEL) or force:
        index_document_task.delay(str(document_id), force)


def enqueue_reindex(document_ids: Sequence[uuid.UUID | str], *, job: IndexJob | None = None, force: bool = True) -> int:
    """Queue these documents for (re)indexing in batches; each batch records its progress on `job`."""
    ids = [str(pk) for pk in document_ids]
    for start in range(0, len(ids), REINDEX_BATCH):
        index_batch_task.delay(ids[start : start + REINDEX_BATCH], str(job.pk) if job else None, force)
    return len(ids)


def repair_index(report: ReconcileReport) -> int:
    """Carry out what reconciliation found: drop deleted documents' chunks, queue the rest; how many were queued."""
    if report.to_remove:
        remove_document_chunks(document_ids=report.to_remove)
    return enqueue_reindex(report.to_reindex)
