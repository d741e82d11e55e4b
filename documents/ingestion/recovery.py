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


def _stalled(lease: int) -> Q:
    cutoff = timezone.now() - timedelta(seconds=lease)
    # A job of uploads whose task never reached the broker; a job of `import_path` has no uploads and no task.
    unsent = Q(stage=ImportStage.QUEUED, enqueued_at__isnull=True, created_at__lt=cutoff) & ~Q(uploads=[])
    return unsent | abandoned_parsing(cutoff)


def import_jobs_stalled(*, lease: int) -> list[uuid.UUID]:
    """Jobs no task will run: never sent for `lease` seconds, or parsing with no heartbeat for as long."""
    return list(ImportJob.objects.filter(_stalled(lease)).order_by("created_at").values_list("pk", flat=True))


def import_job_requeue(*, job_id: uuid.UUID | str, lease: int) -> bool:
    """Put a stalled job back to queued, its task to be sent; False when it moved meanwhile (a worker took it)."""
    return (
        ImportJob.objects.filter(pk=job_id)
        .filter(_stalled(lease))
        .update(stage=ImportStage.QUEUED, enqueued_at=None, heartbeat_at=None)
        == 1
    )
