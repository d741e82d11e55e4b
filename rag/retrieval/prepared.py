"""Cursors whose statements are prepared on their connection: parsed and planned once, not on every search.

The graph's queries join the visible documents several times (each hop, the final ranking, every
title check), so PostgreSQL spent about 3 ms parsing and planning a hop that ran in under 1 ms
(100k chunks; bench/latency.py). A prepared statement is planned once
(a generic plan, whatever the values) and run with that plan: the text and the parameters' types key
it, so one statement serves every viewer of every scope of the same shape.

Only these cursors bind their parameters on the server (psycopg's `Cursor`); Django's own cursors
bind on the client and never prepare. With DATABASE_PREPARED_STATEMENTS=false (behind a connection
pooler that cannot keep a session's prepared statements) these cursors run the same statements unprepared.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import transaction
from django.db.backends.utils import CursorWrapper

from config.replicas import read_connection


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """A cursor on this thread's connection whose statements are prepared there and run with their generic plan.

    PostgreSQL would otherwise keep planning each execution (a custom plan) whenever the values make the
    custom plans look cheaper than the generic one, as they do for the graph's hops, whose cost depends on the
    entities they start from; the generic plan ran each hop alike (docs/benchmarks.md). The setting is local to
    a transaction around the cursor. Wrapped as Django wraps its own cursors: database errors are Django's,
    and query logging and execute wrappers see its statements.
    """
    # A read replica's connection when the request may read one (config.replicas): SET LOCAL and prepared
    # statements are allowed in its read-only transactions.
    connection = read_connection()
    with transaction.atomic(using=connection.alias):
        with connection.cursor() as setting:
            setting.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        with connection.wrap_database_errors:
            # Any: django-stubs types make_cursor's argument as Django's own wrapper, not the driver's cursor it wraps.
            raw: Any = psycopg.Cursor(connection.connection)
        cursor = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
        with cursor:
            yield cursor
