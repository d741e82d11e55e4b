"""Celery tasks of the documents app. Tasks take ids and call one service; re-running one is harmless."""

from __future__ import annotations

import uuid

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction

from documents.ingestion.jobs import import_job_fail, import_uploads


@shared_task(acks_late=True, reject_on_worker_lost=True)
def import_job_task(job_id: str) -> None:
    try:
        import_uploads(job_id=job_id)
    except SoftTimeLimitExceeded:
        # Acknowledged, so never redelivered: say so on the job rather than leave it parsing forever.
        import_job_fail(
            job_id=job_id, reason="The import ran out of time (CELERY_TASK_SOFT_TIME_LIMIT); import fewer files at once."
        )


def enqueue_import(job_id: uuid.UUID) -> None:
    """Parse the job's uploads on the worker once the job is committed (in-process without a broker)."""
    transaction.on_commit(lambda: import_job_task.delay(str(job_id)))
