"""Running something once on every thread of a pool: warming a worker's request threads, closing a pool's connections."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor


def on_each_thread(executor: Executor, threads: int, fn: Callable[[], None], *, timeout: float = 30) -> None:
    """Call `fn` once on each of `threads` threads of `executor`, and wait for all of them.

    Each call holds its thread at a barrier until all `threads` calls have started, so each runs on a thread of
    its own: a pool starts a new thread for a task only when none is idle. A pool smaller than `threads` breaks
    the barrier after `timeout` seconds, and some of its threads then call `fn` twice.
    """
    if threads < 1:
        return
    barrier = threading.Barrier(threads)

    def run() -> None:
        try:
            barrier.wait(timeout=timeout)
        except threading.BrokenBarrierError:
            pass  # a pool smaller than `threads`: each of its threads calls `fn` all the same, some twice
        fn()

    for future in [executor.submit(run) for _ in range(threads)]:
        future.result()
