"""Celery app: JSON only, acks late, time limits; eager in-process when no broker is configured.

Also what every long task shares: retries of transient errors (`retrying`) and a heartbeat (`heartbeat`)
that tells the recovery passes the task is still alive.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import kombu.exceptions
from celery import Celery, Task
from celery.signals import after_setup_logger, after_setup_task_logger, task_postrun, worker_init, worker_process_init
from celery.utils.time import get_exponential_backoff_interval
from django import db
from django.conf import settings
from django.utils import timezone

from config.broker import queue_length, queue_names
from config.metrics import TASKS, BrokerCollector, register_scrape_collector

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("cairn")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# /metrics reports this app's broker: up or not, and how many tasks wait.
register_scrape_collector(BrokerCollector(app))


@after_setup_logger.connect
@after_setup_task_logger.connect
def _json_worker_logs(logger: logging.Logger, **kwargs: Any) -> None:
    """With LOG_FORMAT=json the worker's lines are JSON too: Celery sets up its own handlers, this swaps their format."""
    if settings.LOG_FORMAT != "json":
        return
    from config.logs import JsonFormatter
    from config.middleware import RequestIdFilter

    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())
        handler.addFilter(RequestIdFilter())


@task_postrun.connect
def _count_task(sender: Any = None, state: str | None = None, **kwargs: Any) -> None:
    """Every finished task counts in `cairn_tasks_total`: the alert rules tell a missing worker by none finishing."""
    TASKS.labels(getattr(sender, "name", "unknown"), (state or "unknown").lower()).inc()


@worker_init.connect
def _preload(**kwargs: Any) -> None:
    """In the worker's main process, before it forks its pool: what the pool's processes share (config.warmup)."""
    import gc

    import django

    from config import warmup

    django.setup()  # done already when the tasks were imported; the apps register their steps there
    warmup.preload()
    db.connections.close_all()  # none may cross the fork
    gc.collect()
    gc.freeze()  # as config.wsgi does: the children's collections leave the shared pages unwritten


@worker_process_init.connect
def _warm_up(**kwargs: Any) -> None:
    """In each pool process, before its first task: its own onnxruntime session (on its share of the cores) and a
    first query."""
    from django.conf import settings

    from config import warmup

    # The pool's processes embed side by side: each on RAG_LOCAL_ENCODER_WORKER_THREADS, its share of the cores.
    settings.RAG_LOCAL_ENCODER_THREADS = settings.RAG_LOCAL_ENCODER_WORKER_THREADS

    warmup.warm_up("celery worker")


logger = logging.getLogger("config.celery")


try:
    from botocore.exceptions import HTTPClientError

    _STORAGE_ERRORS: tuple[type[Exception], ...] = (HTTPClientError,)
except ImportError:  # without the `s3` extra there is no bucket to reach
    _STORAGE_ERRORS = ()

# The broker could not be reached (refused, reset, timed out): kombu wraps redis' and amqp's errors in this.
BROKER_ERRORS: tuple[type[Exception], ...] = (kombu.exceptions.OperationalError,)
# Errors that say nothing about the work itself: the database or the broker was unreachable for a while
# (a restart, a dropped connection, a deadlock or a statement cancelled), or an S3 imports storage could not be
# reached (botocore's connection errors). Trying again later may succeed.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (db.OperationalError, db.InterfaceError, *_STORAGE_ERRORS, *BROKER_ERRORS)
# Pauses before the retries of a task: 2, 4, 8... seconds (each drawn at random below that), at most a minute.
RETRY_BACKOFF = 2
RETRY_BACKOFF_MAX = 60


@contextmanager
def retrying(
    task: Task,
    *,
    requeue: Callable[[], None],
    queued: Callable[[datetime], None],
    give_up: Callable[[BaseException], None],
) -> Iterator[None]:
    """Run a bound task's work: a transient error queues the task again, anything else is given up.

    On a transient error, with retries left (CELERY_TASK_MAX_RETRIES), `requeue()` first puts the task's
    rows back as waiting for a task, the retry is sent with a backoff, then `queued(sent_at)` records it is
    in the queue, so the recovery passes leave it there. Any other error, the last transient one, or one raised
    in-process (no broker to wait in) goes to `give_up(exc)`, which says on the rows why; it is raised again.
    """
    try:
        yield
    except TRANSIENT_ERRORS as exc:
        if not task.request.is_eager:
            # A connection the error broke is not used again: the next query opens a fresh one.
            db.close_old_connections()
        retries = task.request.retries
        if task.request.is_eager or retries >= settings.CELERY_TASK_MAX_RETRIES:
            _give_up(give_up, exc)
            raise
        countdown = get_exponential_backoff_interval(RETRY_BACKOFF, retries, RETRY_BACKOFF_MAX, full_jitter=True)
        logger.warning("%s hit %s; retry %d in %d s", task.name, type(exc).__name__, retries + 1, countdown)
        # With the database still down the rows cannot say so; the retry is sent all the same, and
        # does the work (or the recovery pass does, once their lease runs out).
        _attempt("let go of its rows for the retry", requeue)
        sent_at = timezone.now()
        retry = task.retry(exc=exc, countdown=countdown, max_retries=settings.CELERY_TASK_MAX_RETRIES, throw=False)
        _attempt("record its retry as queued", lambda: queued(sent_at))
        raise retry from exc
    except Exception as exc:
        _give_up(give_up, exc)
        raise


def _give_up(give_up: Callable[[BaseException], None], exc: BaseException) -> None:
    _attempt("record why it failed", lambda: give_up(exc))


def _attempt(what: str, write: Callable[[], None]) -> None:
    try:
        write()
    except Exception:
        # The database may be what failed: the rows then stay as they are, and their lease runs out.
        logger.exception("a task could not %s", what)


def empty_queues() -> frozenset[str]:
    """The queues no task waits in; none when the broker cannot be read. With every queue empty it holds "" too: a
    task whose queue was not recorded cannot be waiting anywhere either.

    The indexing recovery pass takes a task recorded as queued a lease ago, in a queue that is empty now, as lost
    (see `queue_is_empty`): so an edit whose task died is found while an import keeps the bulk queue long.
    """
    if app.conf.task_always_eager:
        return frozenset((*queue_names(app), ""))  # tasks run in-process: none ever waits
    try:
        empty = {queue for queue in queue_names(app) if queue_length(app, queue) == 0}
    except Exception as exc:
        logger.warning("cannot read the length of the task queues: %s", exc)
        return frozenset()
    return frozenset(empty | ({""} if len(empty) == len(queue_names(app)) else set()))


def queue_is_empty() -> bool:
    """True when no task waits in any queue (interactive or bulk); False when some do, or the broker cannot be read.

    The recovery passes take an empty queue as proof that a task recorded as queued a lease ago is
    not waiting there any more: a worker took it and died or failed before it could say so, or the
    broker lost it (a Redis restarted without its data).
    """
    return "" in empty_queues()  # every queue empty (or tasks run in-process, where none ever waits)


@contextmanager
def heartbeat(beat: Callable[[], object], *, every: float) -> Iterator[None]:
    """Call `beat` every `every` seconds, from a thread, while the block runs: the task's sign of life.

    A process that dies takes its thread with it, so the beats stop and the recovery passes see the
    work as abandoned once they are older than a lease. The thread has a database connection of its
    own (Django's are per thread), closed when the block ends; a beat that fails is logged and the next
    one tries again on a fresh connection.
    """
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.wait(every):
                try:
                    beat()
                except Exception as exc:
                    logger.warning("heartbeat failed: %s", exc)
                    db.connection.close()
        finally:
            db.connections.close_all()

    thread = threading.Thread(target=run, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every)
