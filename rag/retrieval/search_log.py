"""The search log: one row and one log line per rag.search, the query's text only with RAG_LOG_QUERIES."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection, transaction

from permissions.models import User
from rag.models import SearchLog
from rag.retrieval.hits import SearchResult

logger = logging.getLogger("rag.search")


def search_log_create(*, user: User, query: str, mode: str, result: SearchResult, results: int, degraded: bool) -> SearchLog:
    """Record one search for the admin's views (zero results, top queries) and the log."""
    text = query if settings.RAG_LOG_QUERIES else ""
    logger.info(
        "rag.search mode=%s results=%d latency=%s%s",
        mode,
        results,
        result.latency,
        f" query={query!r}" if text else "",
        # Fields of their own in JSON logs (LOG_FORMAT=json).
        extra={"search_mode": mode, "results": results, "total_ms": result.total_ms, "degraded": degraded},
    )
    with transaction.atomic():
        # A log row may be lost in a crash: its commit need not wait for the WAL to reach the disk,
        # which cost a search about 2.5 ms (bench/metrics_overhead.py, docs/benchmarks.md).
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
        return SearchLog.objects.create(
            user=user,
            team_id=user.team_id,
            query=text,
            mode=mode,
            results=results,
            degraded=degraded,
            latency=result.latency,
            total_ms=result.total_ms,
        )
