"""gunicorn's settings file (`gunicorn --config python:config.gunicorn`): the worker, and its log lines in LOG_FORMAT.

gunicorn reads this module's public globals as its settings, so helpers are imported under private names.
The worker is gthread's, answering what gunicorn refuses before Django sees it (headers over its limits,
a malformed request line) in the API's JSON error shape (config.gunicorn_worker); a `--worker-class` on
the command line would replace it. Without LOG_FORMAT=json gunicorn logs as usual. No child_exit hook calls
prometheus_client's mark_process_dead: it only removes live gauges' files, and Cairn keeps no gauge in
processes (config/metrics.py), while a dead worker's counters must stay in the sums.

The app is loaded once, in the master, before it forks the workers (`preload_app`): the workers share its
imports and compiled templates copy-on-write instead of each loading its own (~100 MB a worker). The master
then runs what config.warmup preloads (LiteLLM's import when configured, the encoder's shared files) and
holds no connection across the fork; each worker loads its own onnxruntime session and runs a first query
before it takes a request (`post_worker_init`), then opens each request thread's database connection with a
search on it, so no request waits for the model or a connection and /health answers only once a worker has
them. `--no-preload` on the command line loads the app in each worker instead, warm-up included.
"""

from __future__ import annotations

import os as _os
from typing import Any as _Any

from django.conf import settings as _settings

# As config.wsgi does; the settings are read on first use, below.
_os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

worker_class = "config.gunicorn_worker.JsonErrorThreadWorker"
preload_app = True


def when_ready(server: _Any) -> None:
    """In the master, once the app is loaded and before the first fork: what the workers will share."""
    if not server.cfg.preload_app:
        return
    import gc

    from django import db

    from config import warmup

    warmup.preload()
    # A connection does not survive a fork (two processes on one socket): the workers open their own.
    db.connections.close_all()
    # As config.wsgi does after its imports: what was loaded since lives as long as the process, out of the
    # collector's sight, so a collection in a worker does not write to (and so copy) the pages it shares.
    gc.collect()
    gc.freeze()


def post_worker_init(worker: _Any) -> None:
    """In each worker, before its first request: its own onnxruntime session, the tokenizer, a first query; then
    each request thread's own database connection, with search's statements prepared on it."""
    from config import warmup

    warmup.warm_up("gunicorn worker")
    # gthread's pool of request threads exists by now (ThreadWorker.init_process makes it before this hook).
    pool = getattr(worker, "tpool", None)
    if pool is not None:
        warmup.warm_threads(pool, worker.cfg.threads, "gunicorn worker")


if _settings.LOG_FORMAT == "json":
    _logging: dict[str, _Any] = _settings.LOGGING
    # gunicorn's start-up, worker and access lines through the same JSON handler as the app's.
    logconfig_dict = {
        **_logging,
        "loggers": {
            **_logging["loggers"],
            "gunicorn.error": {"handlers": ["console"], "level": _settings.LOG_LEVEL, "propagate": False},
            "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
        },
    }
