"""Celery app: JSON only, acks late, time limits; eager in-process when no broker is configured."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("cairn")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
