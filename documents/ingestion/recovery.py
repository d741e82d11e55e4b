"""Import jobs a dead worker or a down broker left behind: found, and queued again.

A queued job whose task reached the broker waits in the queue, however long it is. A job whose task
never did (the broker was down when it was created) and one left parsing by a worker that stopped
beating are put back to queued and sent again by the recovery pass (documents.tasks.recover_imports).
Running one twice is harmless: the claim is conditional and a job skips the files it already recorded.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from documents.ingestion.jobs import abandoned_parsing
from documents.models import ImportJob, ImportStage


def import_job_beat(*, job_id: uuid.UUID | str) -> None:
    """The heartbeat of the worker parsing the job."""
    ImportJob.objects.filter(pk=job_id, stage=ImportStage.PARSING).update(heartbeat_at=timezone.now())


def import_job_enqueued(*, job_id: uuid.UUID | str) -> None:
    """The job's task reached the broker: the job waits in the queue."""
    ImportJob.objects.filter(pk=job_id, stage=ImportStage.QUEUED).update(enqueued_at=timezone.now())


def import_job_release(*, job_id: uuid.UUID | str) -> None:
    """The worker lets go of the job, to run it again later (a retry): queued, its task not yet sent."""
    ImportJob.objects.filter(pk=job_id, stage=ImportStage.PARSING).update(
        stage=ImportStage.QUEUED, enqueued_at=None, heartbeat_at=None
    )


def _stalled(lease: int, queue_empty: bool) -> Q:
    cutoff = timezone.now() - timedelta(seconds=lease)
    unsent = Q(enqueued_at__isnull=True)
    if queue_empty:
        # No task waits in the queue: one sent a lease ago was taken by a worker that died before its
        # claim, or lost with the broker.
        unsent |= Q(enqueued_at__lt=cutoff)
    # A job of `import_path` has no uploads and no task: its command runs it.
    queued = Q(stage=ImportStage.QUEUED, created_at__lt=cutoff) & unsent & ~Q(uploads=[])
    return queued | abandoned_parsing(cutoff)


def import_jobs_stalled(*, lease: int, queue_empty: bool = False) -> list[uuid.UUID]:
    """Jobs no task will run: queued but never sent, or parsing with no heartbeat, for `lease` seconds.

    With `queue_empty` (config.celery.queue_is_empty), so are queued jobs sent more than a lease ago.
    """
    return list(ImportJob.objects.filter(_stalled(lease, queue_empty)).order_by("created_at").values_list("pk", flat=True))


def import_job_requeue(*, job_id: uuid.UUID | str, lease: int, queue_empty: bool = False) -> bool:
    """Put a stalled job back to queued, its task to be sent; False when it moved meanwhile (a worker took it)."""
    return (
        ImportJob.objects.filter(pk=job_id)
        .filter(_stalled(lease, queue_empty))
        .update(stage=ImportStage.QUEUED, enqueued_at=None, heartbeat_at=None)
        == 1
    )
