"""What a serving process loads before it serves, off the request path: registered by the apps, run by the servers' hooks.

Two steps, because a server forks its workers from one parent:

- `preload()` runs once in the parent before it forks (gunicorn's master with `preload_app`, the Celery
  worker's main process): what the workers then share copy-on-write, such as imports (LiteLLM's takes
  seconds), the compiled templates and the model's files on disk. Nothing here may hold a thread, a socket or a connection, which
  do not survive a fork: no database connection, no Redis client, no onnxruntime session.
- `warm_up()` runs in each worker process after the fork, before it takes a request or a task (gunicorn's
  `post_worker_init`, Celery's `worker_process_init`): its own onnxruntime session, the tokenizer, a first
  query through both.
- `warm_threads()` runs in each gunicorn worker next, on every one of its request threads: what is a thread's
  own, its database connection (Django keeps one per thread) with the statements search prepares on it. Without
  it a worker's first requests each opened a connection and planned their statements: 2 to 3 times a warm search.

`state()` says what this process has loaded, for /health (config.health). An app registers its steps
in its AppConfig.ready(), as rag does (rag.warmup); config imports no app.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from config.threads import on_each_thread

logger = logging.getLogger("config.warmup")


@dataclass(frozen=True)
class Step:
    name: str
    # Run in the parent before it forks: shared by the workers. None: nothing to share.
    preload: Callable[[], None] | None = None
    # Run in each worker process before it serves; returns what it loaded, in a few words.
    warm: Callable[[], str] | None = None
    # What this process holds now, read at each /health ("not loaded" until warm ran or a request loaded it).
    report: Callable[[], str] | None = None
    # Run on each request thread of a worker before it serves: what belongs to a thread (its database connection).
    warm_thread: Callable[[], None] | None = None


def _compile_templates() -> None:
    """Every template of the project's and the apps' folders, compiled into the cached loader: shared by the workers."""
    from django.template import TemplateDoesNotExist, TemplateSyntaxError, engines
    from django.template.utils import get_app_template_dirs

    for engine in engines.all():
        folders: list[str | Path] = [*engine.dirs, *(get_app_template_dirs("templates") if engine.app_dirs else ())]
        for folder in map(Path, folders):
            for path in sorted(folder.rglob("*.html")):
                try:
                    engine.get_template(path.relative_to(folder).as_posix())
                except (TemplateDoesNotExist, TemplateSyntaxError):
                    pass  # a fragment that only compiles where it is included: compiled on first use


_steps: list[Step] = [Step("templates", preload=_compile_templates)]


def register_warmup(step: Step) -> None:
    if all(existing.name != step.name for existing in _steps):
        _steps.append(step)


def preload() -> None:
    """Every registered preload, in this (parent) process; a failure is logged and left to the workers to meet."""
    started = time.perf_counter()
    for step in _steps:
        if step.preload is None:
            continue
        try:
            step.preload()
        except Exception:
            # The worker's warm-up (or its first request) meets the same error, and says so where it matters.
            logger.exception("preloading %s failed", step.name)
    names = ", ".join(s.name for s in _steps if s.preload is not None)
    logger.info("preloaded %s in %.1f s (pid %d)", names, time.perf_counter() - started, os.getpid())


def warm_up(process: str) -> None:
    """Every registered warm-up, in this worker process, before it serves; each logged on one line."""
    started = time.perf_counter()
    loaded = []
    for step in _steps:
        if step.warm is None:
            continue
        try:
            loaded.append(f"{step.name}: {step.warm()}")
        except Exception:
            # Serving starts all the same: the first request meets the error and reports it as usual.
            logger.exception("warming up %s failed", step.name)
    took = time.perf_counter() - started
    # The serve test reads this line: a worker has its model before its first request.
    logger.info("%s (pid %d) warmed up in %.1f s: %s", process, os.getpid(), took, "; ".join(loaded) or "nothing to load")


def warm_threads(executor: Executor, threads: int, process: str) -> None:
    """Every registered per-thread warm-up on each of `threads` threads of `executor` (a worker's request threads).

    (config.threads.on_each_thread: one call on each thread, some twice if the pool is smaller.)
    """
    steps = [step for step in _steps if step.warm_thread is not None]
    if not steps or threads < 1:
        return
    started = time.perf_counter()

    def warm() -> None:
        for step in steps:
            try:
                step.warm_thread()  # type: ignore[misc]  # filtered above
            except Exception:
                # The thread serves all the same: its first request meets the error and reports it as usual.
                logger.exception("warming up %s on a request thread failed", step.name)

    on_each_thread(executor, threads, warm)
    logger.info(
        "%s (pid %d) warmed %d request threads in %.1f s: %s",
        process,
        os.getpid(),
        threads,
        time.perf_counter() - started,
        ", ".join(step.name for step in steps),
    )


def state() -> dict[str, str]:
    """What this process has loaded, by step ("not loaded" before its warm-up); empty when no app registered any."""
    report = {}
    for step in _steps:
        if step.report is not None:
            try:
                report[step.name] = step.report()
            except Exception as exc:  # health must report, never raise
                report[step.name] = f"error: {exc.__class__.__name__}"
    return report
