"""/health: database and broker status, 503 when the database is down; and what this process has loaded.

`models` says whether the process that answered holds its embedding model ("loaded (all-MiniLM-L6-v2)") or
not yet. It does not change the status: under gunicorn and `make run` a worker loads the model before it takes
any request (config.warmup), so a worker that answers /health has it; a process without the warm-up (the
development server, a test client) loads it on its first search.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from config import warmup


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
    body = {"status": "ok" if healthy else "error", "database": database, "broker": broker, **warmup.state()}
    return JsonResponse(body, status=200 if healthy else 503)
