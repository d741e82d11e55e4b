"""gunicorn's settings file (`gunicorn --config python:config.gunicorn`): the worker, and its log lines in LOG_FORMAT.

gunicorn reads this module's public globals as its settings, so helpers are imported under private names.
The worker is gthread's, answering what gunicorn refuses before Django sees it (headers over its limits,
a malformed request line) in the API's JSON error shape (config.gunicorn_worker); a `--worker-class` on
the command line would replace it. Without LOG_FORMAT=json gunicorn logs as usual. No child_exit hook calls
prometheus_client's mark_process_dead: it only removes live gauges' files, and Cairn keeps no gauge in
processes (config/metrics.py), while a dead worker's counters must stay in the sums.
"""

from __future__ import annotations

import os as _os
from typing import Any as _Any

from django.conf import settings as _settings

# As config.wsgi does; the settings are read on first use, below.
_os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

worker_class = "config.gunicorn_worker.JsonErrorThreadWorker"

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
