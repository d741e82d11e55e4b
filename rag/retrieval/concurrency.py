"""A per-process pool of search threads, each with its own database connection.

Hybrid search ranks by keyword on one of these while the request thread embeds the query and
ranks by vector, so the two take one core each instead of queueing.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings
from django.db import close_old_connections, connection

from config.threads import on_each_thread

T = TypeVar("T")

MAX_THREADS = 4

_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_threads = 0
_threads_lock = threading.Lock()


def _thread_started() -> None:
    global _threads
    with _threads_lock:
        _threads += 1


def _pool() -> ThreadPoolExecutor:
    """This process's pool; a forked child (gunicorn forks after --preload) starts its own."""
    global _executor, _executor_pid, _threads
    if _executor is None or _executor_pid != os.getpid():
        # Threads start only when requests overlap (a sync worker uses one; gthread workers up to
        # their thread count), each opening its own connection on first use.
        _executor = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="rag-search", initializer=_thread_started)
        _executor_pid, _threads = os.getpid(), 0
    return _executor


def can_overlap() -> bool:
    """A second connection cannot see this one's uncommitted writes: overlap only outside transactions."""
    return settings.RAG_CONCURRENT_SEARCH and not connection.in_atomic_block


def run_in_background(fn: Callable[..., T], /, **kwargs) -> Future[tuple[T, float]]:
    """Run `fn(**kwargs)` on a search thread; the future holds (result, milliseconds it took)."""

    def run() -> tuple[T, float]:
        # No request signals on this thread: honour CONN_MAX_AGE and drop broken connections here.
        close_old_connections()
        started = time.perf_counter()
        return fn(**kwargs), round((time.perf_counter() - started) * 1000, 2)

    # The caller's context goes along: its reads go to the same database (config.replicas) on this thread.
    return _pool().submit(contextvars.copy_context().run, run)


def close_background_connections() -> None:
    """Close the search threads' database connections (a test dropping its database needs this)."""
    if _executor is None or _executor_pid != os.getpid() or not _threads:
        return
    # A lambda: `connection` names the connection of the thread that looks it up.
    on_each_thread(_executor, _threads, lambda: connection.close(), timeout=10)
