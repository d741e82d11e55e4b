"""/health: database and broker status, 503 when the database is down."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        return "ok" if row else "ok (pgvector missing: run migrate)"
    except Exception as exc:  # health must report, never raise
        return f"error: {exc.__class__.__name__}"


def _broker() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "in-process (no broker configured)"
    try:
        from config.celery import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0, timeout=2)
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def health(request: HttpRequest) -> JsonResponse:
    database, broker = _database(), _broker()
    healthy = database.startswith("ok") and not broker.startswith("error")
    return JsonResponse(
        {"status": "ok" if healthy else "error", "database": database, "broker": broker}, status=200 if healthy else 503
    )
