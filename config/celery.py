"""Celery app: JSON only, acks late, time limits; eager in-process when no broker is configured."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, task_postrun

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
    from django.conf import settings

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
