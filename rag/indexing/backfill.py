"""The backfill: building the configured model's chunks for teams still searched with an earlier model.

A model change (RAG_EMBEDDING_MODEL, or another encoder with its own model id) leaves every team on
the model it has (rag.models.ServingModel) and starts one backfill job (rag.models.IndexJob with
`backfill`). The job feeds itself one batch at a time (rag.tasks.backfill_task): each step claims
the next documents the configured model lacks, indexes them (vectors are reused by content hash
where this model already embedded the same text), records progress, and queues the next step.
Nothing waits in the queue long enough to look lost to recovery, a crash redelivers one step, and
a job silent for longer than a task may run (a lost message, a provider outage) is restarted by the next
reconciliation. Teams switch as soon as they are covered (rag.indexing.model_switch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from documents.models import Document
from permissions.models import User
from rag.indexing.index_status import in_flight, mark_pending
from rag.indexing.jobs import job_create, job_record
from rag.indexing.model_switch import documents_lacking_configured_model, switch_covered_teams, teams_behind
from rag.indexing.pipeline import index_documents
from rag.models import IndexJob, IndexState, IndexStatus, JobState

logger = logging.getLogger("rag.indexing")

# Documents per step: enough for full embedding batches, few enough that a redelivered step repeats little.
BACKFILL_BATCH = 32


@dataclass(frozen=True)
class BackfillStart:
    job: IndexJob
    # True when no step of the job is queued or running: the caller queues the first (or next) one.
    needs_step: bool


def backfill_candidates(*, since) -> QuerySet[Document]:
    """What is left to backfill: documents the configured model lacks, not being indexed now, not failed since `since`.

    Documents in flight (an edit's task, a step) are left to that task; those that failed during
    this job are left to reconciliation, which retries failures, so a step never loops on one.
    """
    model_id = settings.RAG_EMBEDDING_MODEL
    busy = IndexStatus.objects.filter(model_id=model_id).filter(
        in_flight(lease=settings.RAG_INDEX_LEASE) | Q(state=IndexState.FAILED, updated_at__gte=since)
    )
    return documents_lacking_configured_model().exclude(pk__in=busy.values("document_id")).order_by("pk")


def backfill_start(*, by: User | None = None) -> BackfillStart | None:
    """The running backfill of the configured model, or a new one; None when every team is on the configured model."""
    model_id = settings.RAG_EMBEDDING_MODEL
    now = timezone.now()
    # A backfill of a model no longer configured builds chunks nobody will search.
    IndexJob.objects.filter(backfill=True, state=JobState.RUNNING).exclude(model_id=model_id).update(
        state=JobState.FAILED, finished_at=now
    )
    switch_covered_teams()
    behind = teams_behind()
    if not behind:
        return None
    job = IndexJob.objects.filter(backfill=True, state=JobState.RUNNING, model_id=model_id).order_by("created_at").first()
    if job is not None:
        # Steps record progress every batch: a job silent for longer than a task may run has no step left
        # (its next step may wait behind a long queue, so not the index lease).
        silent = job.updated_at < now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
        return BackfillStart(job=job, needs_step=silent)
    earlier = sorted({m.model_id for m in behind.values()})
    job = job_create(
        description=f"backfill {model_id} for {len(behind)} team(s) searched with {', '.join(earlier)}",
        total=backfill_candidates(since=now).count(),
        model_id=model_id,
        by=by,
        backfill=True,
    )
    logger.info("backfill of %s started: %d document(s), job %s", model_id, job.total, job.pk)
    return BackfillStart(job=job, needs_step=True)


def backfill_step(*, job_id) -> bool:
    """Index the next batch of a running backfill; True when another step should follow."""
    job = IndexJob.objects.filter(pk=job_id, backfill=True, state=JobState.RUNNING).first()
    if job is None:
        return False
    if job.model_id != settings.RAG_EMBEDDING_MODEL:
        IndexJob.objects.filter(pk=job.pk).update(state=JobState.FAILED, finished_at=timezone.now())
        return False
    ids = list(backfill_candidates(since=job.created_at).values_list("pk", flat=True)[:BACKFILL_BATCH])
    if not ids:
        backfill_finish(job)
        return False
    # Claimed: pending, so the next step, recovery and reconciliation leave them to this one.
    mark_pending(document_ids=ids, model_id=job.model_id)
    result = index_documents(document_ids=ids)
    job_record(job_id=job.pk, done=len(ids) - len(result.failed), failed=len(result.failed))
    if len(result.failed) == len(ids):
        # The provider is failing (after its retries): pause rather than mark every document failed.
        # The next reconciliation restarts the job once it has been silent for CELERY_TASK_TIME_LIMIT seconds.
        logger.warning("backfill of %s paused: a whole batch failed (job %s)", job.model_id, job.pk)
        return False
    return True


def backfill_finish(job: IndexJob) -> None:
    """Nothing left to claim: the job is done (teams whose documents failed stay on their model, see rag.status)."""
    IndexJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
        state=JobState.DONE, finished_at=timezone.now(), total=F("done") + F("failed")
    )
    switched = switch_covered_teams()
    waiting = teams_behind()
    logger.info(
        "backfill of %s done (job %s): %d team(s) switched, %d still waiting for documents that failed or are in flight",
        job.model_id,
        job.pk,
        len(switched),
        len(waiting),
    )
