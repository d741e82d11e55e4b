"""Celery tasks and the functions that enqueue them. Tasks take ids and call one service.

Idempotent, so a redelivered task is harmless. Indexing tasks retry transient errors (config.celery.retrying).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from config.broker import queue_length
from config.celery import BROKER_ERRORS, TRANSIENT_ERRORS, app, empty_queues, retrying
from permissions.models import User
from rag.indexing.backfill import backfill_start, backfill_step
from rag.indexing.fallback import reembed_fallback_documents
from rag.indexing.index_status import give_up, in_flight, mark_pending, mark_queued, release, request_index
from rag.indexing.jobs import job_record
from rag.indexing.pipeline import index_with_serving_models, remove_document_chunks
from rag.indexing.reconcile import ReconcileReport, milvus_drift, milvus_repair, reconcile, stuck
from rag.indexing.vector_outbox import outbox_drain
from rag.models import IndexJob, IndexStatus

logger = logging.getLogger("rag.indexing")

# Documents per queued indexing task: enough for full embedding batches, few enough that a
# redelivered task repeats little.
REINDEX_BATCH = 32


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def index_document_task(self: Task, document_id: str, force: bool = False) -> dict:
    with _retrying(self, [document_id]):
        result = index_with_serving_models(document_ids=[document_id], force=force)
    return {"indexed": len(result.indexed), "failed": len(result.failed)}


# A batch task indexes its documents this many at a time, and between two groups gives way to an edit: when an
# edit's task waits in the interactive queue (every process of a worker that serves both queues being busy with
# batches, as `make run`'s is), it queues the documents it has left again and ends, so the edit is indexed next
# rather than after the whole batch (~14 s for 32 files of an import on two cores, ~3 s for 8).
BATCH_GROUP = 8


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def index_batch_task(self: Task, document_ids: list[str], job_id: str | None = None, force: bool = False) -> dict:
    done, indexed, failed = 0, 0, 0
    # Only a batch of the bulk queue gives way (recovery may send one to the interactive queue: edits found lost).
    gives_way = _queue_of(self) != settings.CELERY_QUEUE_INTERACTIVE
    with _retrying(self, document_ids, job_id=job_id):
        for start in range(0, len(document_ids), BATCH_GROUP):
            result = index_with_serving_models(document_ids=document_ids[start : start + BATCH_GROUP], force=force)
            done, indexed, failed = start + BATCH_GROUP, indexed + len(result.indexed), failed + len(result.failed)
            rest = document_ids[done:]
            if rest and gives_way and _edit_waiting() and _queue_again(rest, job_id=job_id, force=force):
                break
    done = min(done, len(document_ids))
    if job_id:
        job_record(job_id=job_id, done=done - failed, failed=failed)
    return {"indexed": indexed, "failed": failed, "queued_again": len(document_ids) - done}


def _edit_waiting() -> bool:
    """Whether a task waits in the interactive queue; False when the broker cannot say (the batch then goes on)."""
    if app.conf.task_always_eager:
        return False
    try:
        return queue_length(app, settings.CELERY_QUEUE_INTERACTIVE, timeout=1) > 0
    except Exception as exc:
        logger.warning("cannot read the interactive queue's length: %s", exc)
        return False


def _queue_again(document_ids: list[str], *, job_id: str | None, force: bool) -> bool:
    """Queue these documents in a batch task of their own, behind the edit; False (this task goes on) if the broker refuses."""
    sent_at = timezone.now()
    try:
        index_batch_task.apply_async((document_ids, job_id, force), queue=settings.CELERY_QUEUE_BULK)
    except BROKER_ERRORS as exc:
        logger.warning("could not queue %d document(s) again behind an edit; indexing them now: %s", len(document_ids), exc)
        return False
    mark_queued(document_ids=document_ids, sent_at=sent_at, queue=settings.CELERY_QUEUE_BULK)
    return True


def _queue_of(task: Task) -> str:
    """The queue the running task was taken from ("" in-process)."""
    return str((task.request.delivery_info or {}).get("routing_key") or "")


def _retrying(task: Task, document_ids: list[str], *, job_id: str | None = None) -> AbstractContextManager[None]:
    """A transient error queues the task again, its documents pending meanwhile; any other fails them with the reason."""

    def failed(exc: BaseException) -> None:
        give_up(document_ids=document_ids, reason=failure_reason(exc))
        if job_id:
            job_record(job_id=job_id, failed=len(document_ids))

    return retrying(
        task,
        requeue=lambda: release(document_ids=document_ids),
        queued=lambda sent_at: mark_queued(document_ids=document_ids, sent_at=sent_at, queue=_queue_of(task)),
        give_up=failed,
    )


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, TRANSIENT_ERRORS):
        return f"The database or the broker could not be reached, even after retries ({type(exc).__name__}: {exc})"
    return f"Indexing stopped on an unexpected error ({type(exc).__name__}: {exc})"


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
    counts = report.counts()
    if settings.RAG_VECTOR_BACKEND == "milvus":
        drift = milvus_drift()
        if milvus_repair(drift):
            outbox_drain()
        counts |= {f"milvus_{name}": n for name, n in drift.counts().items()}
    return counts


# A beat pass of the vector outbox: rows per batch, and the seconds after which it leaves the rest to the next pass.
OUTBOX_PASS_ROWS = 500
OUTBOX_PASS_SECONDS = 1.0


@shared_task(acks_late=True, reject_on_worker_lost=True)
def drain_vector_outbox_task() -> int:
    """Copy the chunk writes the outbox holds into Milvus (beat, every RAG_MILVUS_OUTBOX_INTERVAL seconds).

    It runs in the interactive queue, so an edit's vectors reach Milvus while an import fills the bulk one: a pass
    of OUTBOX_PASS_ROWS rows at a time, for about OUTBOX_PASS_SECONDS, leaves the rest of a backlog to the next
    pass rather than hold up the edits queued behind it.
    """
    return outbox_drain(batch=OUTBOX_PASS_ROWS, max_seconds=OUTBOX_PASS_SECONDS)


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
    """Queue again what a dead process or a down broker left unindexed (beat, every RAG_RECOVER_INTERVAL seconds)."""
    if not settings.RAG_ENABLED:
        return 0
    return recover_index(lease=settings.RAG_INDEX_LEASE)


def recover_index(*, lease: int) -> int:
    """Queue the documents `stuck` finds, marked pending so the lease starts again; how many were queued.

    Those whose lost task was an edit's go back to the interactive queue, not behind an import in the bulk one.
    """
    document_ids = stuck(lease=lease, empty_queues=empty_queues())
    if not document_ids:
        return 0
    logger.info("recovery: queueing %d document(s) again that no task holds", len(document_ids))
    interactive = settings.CELERY_QUEUE_INTERACTIVE
    edits = set(
        IndexStatus.objects.filter(
            document_id__in=document_ids, model_id=settings.RAG_EMBEDDING_MODEL, queue=interactive
        ).values_list("document_id", flat=True)
    )
    mark_pending(document_ids=document_ids, model_id=settings.RAG_EMBEDDING_MODEL)
    rest = [pk for pk in document_ids if pk not in edits]
    return enqueue_reindex(list(edits), force=False, queue=interactive) + enqueue_reindex(rest, force=False)


def queue_for(*, bulk: bool) -> str:
    """The queue of one document's task: the interactive one for an edit, the bulk one for one of a batch (an import)."""
    return settings.CELERY_QUEUE_BULK if bulk else settings.CELERY_QUEUE_INTERACTIVE


def enqueue_index(document_id: uuid.UUID | str, *, force: bool = False) -> None:
    """Queue indexing of one document (an edit: in the interactive queue) unless a queued task will already pick up its
    latest version. A batch's documents go through `enqueue_bulk_index` instead.
    Raises the broker's error when it cannot be reached; the document then stays pending with no task,
    and the recovery pass queues it once the broker is back.
    """
    if request_index(document_id=document_id, model_id=settings.RAG_EMBEDDING_MODEL) or force:
        sent_at = timezone.now()
        queue = queue_for(bulk=False)
        index_document_task.apply_async((str(document_id), force), queue=queue)
        mark_queued(document_ids=[document_id], sent_at=sent_at, queue=queue)


def enqueue_bulk_index(document_ids: Sequence[uuid.UUID | str]) -> int:
    """Queue indexing of a batch's documents (an import's) as `enqueue_reindex` does, leaving out those a queued task
    will already read at their latest version; how many were queued."""
    todo = [pk for pk in document_ids if request_index(document_id=pk, model_id=settings.RAG_EMBEDDING_MODEL)]
    return enqueue_reindex(todo, force=False)


def enqueue_removal(document_id: uuid.UUID | str, *, bulk: bool = False) -> None:
    remove_document_task.apply_async((str(document_id),), queue=queue_for(bulk=bulk))


def enqueue_reindex(
    document_ids: Sequence[uuid.UUID | str], *, job: IndexJob | None = None, force: bool = True, queue: str | None = None
) -> int:
    """Queue these documents for (re)indexing in batches, in the bulk queue unless `queue` says another; each batch
    records its progress on `job`.

    How many were queued: with the broker down, the rest are not, and those marked pending wait for the
    recovery pass (logged, never raised).
    """
    ids = [str(pk) for pk in document_ids]
    queue = queue or settings.CELERY_QUEUE_BULK
    for start in range(0, len(ids), REINDEX_BATCH):
        batch = ids[start : start + REINDEX_BATCH]
        sent_at = timezone.now()
        try:
            index_batch_task.apply_async((batch, str(job.pk) if job else None, force), queue=queue)
        except BROKER_ERRORS as exc:
            logger.warning(
                "could not queue %d document(s) for indexing; recovery will queue them again: %s", len(ids) - start, exc
            )
            return start
        mark_queued(document_ids=batch, sent_at=sent_at, queue=queue)
    return len(ids)


def repair_index(report: ReconcileReport) -> int:
    """Carry out what reconciliation found: drop deleted documents' chunks, queue the rest; how many were queued.

    A document a task holds (pending in the queue, or being indexed with a fresh heartbeat) is left to
    it: queued again, it would wait in the queue twice.
    """
    if report.to_remove:
        remove_document_chunks(document_ids=report.to_remove)
    held = set(
        IndexStatus.objects.filter(document_id__in=report.to_reindex, model_id=report.model_id)
        .filter(in_flight(lease=settings.RAG_INDEX_LEASE, empty_queues=empty_queues()))
        .values_list("document_id", flat=True)
    )
    todo = [pk for pk in report.to_reindex if pk not in held]
    mark_pending(document_ids=todo, model_id=report.model_id)
    return enqueue_reindex(todo)
