"""Bulk indexing jobs (reindex from the admin or `index_documents`, a model's backfill) and their progress."""

from __future__ import annotations

from django.db.models import F
from django.utils import timezone

from permissions.models import User
from rag.models import IndexJob, JobState


def job_create(*, description: str, total: int, model_id: str, by: User | None = None, backfill: bool = False) -> IndexJob:
    return IndexJob.objects.create(description=description, total=total, model_id=model_id, created_by=by, backfill=backfill)


def job_record(*, job_id, done: int = 0, failed: int = 0) -> None:
    now = timezone.now()
    IndexJob.objects.filter(pk=job_id).update(done=F("done") + done, failed=F("failed") + failed, updated_at=now)
    # A backfill finishes when nothing is left to claim (rag.indexing.backfill), not at a count fixed when it began.
    IndexJob.objects.filter(pk=job_id, state=JobState.RUNNING, backfill=False, done__gte=F("total") - F("failed")).update(
        state=JobState.DONE, finished_at=now
    )
