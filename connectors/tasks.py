"""Celery tasks of the connectors app: thin, idempotent, on the bulk queue (CELERY_TASK_DEFAULT_QUEUE)."""

from __future__ import annotations

import logging
import uuid

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from config.celery import BROKER_ERRORS, TRANSIENT_ERRORS, heartbeat, queue_is_empty, retrying
from connectors.models import SyncTrigger
from connectors.sync import sources_due, sync_beat, sync_create, sync_enqueued, sync_fail, sync_release, sync_run, syncs_stalled

logger = logging.getLogger("connectors")


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def sync_source_task(self: Task, sync_id: str) -> None:
    with retrying(
        self,
        requeue=lambda: sync_release(sync_id=sync_id),
        queued=lambda sent_at: sync_enqueued(sync_id=sync_id),
        give_up=lambda exc: sync_fail(sync_id=sync_id, reason=failure_reason(exc)),
    ):
        with heartbeat(lambda: sync_beat(sync_id=sync_id), every=settings.TASK_HEARTBEAT_INTERVAL):
            sync_run(sync_id=sync_id)


def failure_reason(exc: BaseException) -> str:
    if isinstance(exc, SoftTimeLimitExceeded):
        return "The sync ran out of time (CELERY_TASK_SOFT_TIME_LIMIT); the next sync goes on where it stopped."
    if isinstance(exc, TRANSIENT_ERRORS):
        return f"The database or the broker could not be reached, even after retries ({type(exc).__name__}); sync again."
    return f"The sync stopped on an unexpected error ({type(exc).__name__}); sync again."


def enqueue_sync(sync_id: uuid.UUID) -> None:
    """Run the sync on a worker once it is committed (in-process without a broker)."""
    transaction.on_commit(lambda: send_sync(sync_id))


def send_sync(sync_id: uuid.UUID | str) -> bool:
    """Hand the sync's task to the broker; False when it cannot be reached (beat's pass sends it again)."""
    try:
        sync_source_task.delay(str(sync_id))
    except BROKER_ERRORS as exc:
        logger.warning("could not queue sync %s; beat's pass will send it again: %s", sync_id, exc)
        return False
    sync_enqueued(sync_id=sync_id)
    return True


@shared_task(acks_late=True, reject_on_worker_lost=True)
def sync_due_sources_task() -> int:
    """Beat, every CONNECTORS_SCHEDULE_INTERVAL seconds: queue the sources whose schedule is due, and run again
    the syncs a dead worker or a down broker left behind; how many syncs were sent."""
    return sync_due_sources()


def sync_due_sources() -> int:
    sent = 0
    for sync_id in syncs_stalled(lease=settings.CONNECTORS_SYNC_LEASE, queue_empty=queue_is_empty()):
        logger.info("recovery: sync %s had no live task; queued again", sync_id)
        sent += send_sync(sync_id)
    for source in sources_due():
        sync, new = sync_create(source=source, trigger=SyncTrigger.SCHEDULE)
        if new:
            sent += send_sync(sync.pk)
    return sent
