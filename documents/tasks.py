"""Celery tasks of the documents app. Tasks take ids and call one service; re-running one is harmless."""

from __future__ import annotations

import logging
import uuid

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from config.celery import BROKER_ERRORS, TRANSIENT_ERRORS, heartbeat, queue_is_empty, retrying
from documents.ingestion.jobs import import_job_fail, import_uploads
from documents.ingestion.recovery import (
    import_job_beat,
    import_job_enqueued,
    import_job_release,
    import_job_requeue,
    import_jobs_stalled,
)

logger = logging.getLogger("documents.ingestion")


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def import_job_task(self: Task, job_id: str) -> None:
    with retrying(
        self,
        requeue=lambda: import_job_release(job_id=job_id),
        queued=lambda sent_at: import_job_enqueued(job_id=job_id),
        give_up=lambda exc: import_job_fail(job_id=job_id, reason=failure_reason(exc)),
    ):
        # Beats from before the claim: a second delivery of the task finds the job claimed and returns
        # long before its first beat.
        with heartbeat(lambda: import_job_beat(job_id=job_id), every=settings.TASK_HEARTBEAT_INTERVAL):
            import_uploads(job_id=job_id)


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, SoftTimeLimitExceeded):
        return "The import ran out of time (CELERY_TASK_SOFT_TIME_LIMIT); import fewer files at once."
    if isinstance(exc, TRANSIENT_ERRORS):
        return f"The database or the broker could not be reached, even after retries ({type(exc).__name__}); import again."
    return f"The import stopped on an unexpected error ({type(exc).__name__}); import again."


def enqueue_import(job_id: uuid.UUID) -> None:
    """Parse the job's uploads on the worker once the job is committed (in-process without a broker)."""
    transaction.on_commit(lambda: send_import(job_id))


def send_import(job_id: uuid.UUID | str) -> bool:
    """Hand the job's task to the broker; False when it cannot be reached: the job stays queued, unsent, for recovery."""
    try:
        import_job_task.delay(str(job_id))
    except BROKER_ERRORS as exc:
        logger.warning("could not queue import job %s; the recovery pass will send it again: %s", job_id, exc)
        return False
    import_job_enqueued(job_id=job_id)
    return True


@shared_task(acks_late=True, reject_on_worker_lost=True)
def recover_imports_task() -> int:
    """Send again the jobs no task will run (beat, every IMPORT_RECOVER_INTERVAL seconds); how many were sent."""
    return recover_imports(lease=settings.IMPORT_LEASE)


def recover_imports(*, lease: int) -> int:
    sent = 0
    queue_empty = queue_is_empty()
    for job_id in import_jobs_stalled(lease=lease, queue_empty=queue_empty):
        if import_job_requeue(job_id=job_id, lease=lease, queue_empty=queue_empty):
            logger.info("recovery: import job %s had no live task; queued again", job_id)
            sent += send_import(job_id)
    return sent
