"""Where documents stand in the index (per model), and bulk indexing jobs with progress."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from permissions.models import User
from rag.models import IndexJob, IndexState, IndexStatus, JobState

# Rapid edits coalesce: while a queued task has not started, further saves queue nothing. A
# status left pending longer than this (a lost message) no longer holds new requests back.
COALESCE_SECONDS = 300


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


def job_create(*, description: str, total: int, model_id: str, by: User | None = None, backfill: bool = False) -> IndexJob:
    return IndexJob.objects.create(description=description, total=total, model_id=model_id, created_by=by, backfill=backfill)


def job_record(*, job_id, done: int = 0, failed: int = 0) -> None:
    now = timezone.now()
    IndexJob.objects.filter(pk=job_id).update(done=F("done") + done, failed=F("failed") + failed, updated_at=now)
    # A backfill finishes when nothing is left to claim (rag.indexing.backfill), not at a count fixed when it began.
    IndexJob.objects.filter(pk=job_id, state=JobState.RUNNING, backfill=False, done__gte=F("total") - F("failed")).update(
        state=JobState.DONE, finished_at=now
    )
