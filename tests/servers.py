"""Cairn under gunicorn in a subprocess, pointed at this test run's database, for tests over real HTTP."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def database_env() -> dict[str, str]:
    """Point the worker at this test run's database."""
    from django.conf import settings

    db = connection.settings_dict
    if settings.EMBEDDED_DATABASE:
        return {"CAIRN_EMBEDDED_PGDATA": db["OPTIONS"]["data_dir"], "CAIRN_EMBEDDED_DATABASE": db["NAME"], "DATABASE_URL": ""}
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    port = f":{db['PORT']}" if db["PORT"] else ""
    return {"DATABASE_URL": f"postgres://{db['USER']}{password}@{db['HOST']}{port}/{db['NAME']}"}


class GunicornServer:
    """`gunicorn config.wsgi` as deployed (config.gunicorn's gthread workers), with the test settings and the fake providers."""

    def __init__(self, *, log_path: Path, extra_env: dict[str, str] | None = None, workers: int = 1, cwd: Path = ROOT) -> None:
        self.log_path = log_path
        self.workers = workers
        self.cwd = cwd
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            **database_env(),
            "RAG_EMBEDDING_PROVIDER": "fake",
            "RAG_EMBEDDING_MODEL": "fake-embedding",
            "RAG_EMBEDDING_DIMENSION": "384",
            "CAIRN_TEST_LLM_MODEL": "fake-llm",
            # The code is found from any working directory.
            "PYTHONPATH": str(ROOT),
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 60) -> GunicornServer:
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--config",
                "python:config.gunicorn",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                str(self.workers),
                "--threads",
                "4",
                "--timeout",
                "60",
                "--log-level",
                "info",
                "--no-control-socket",
            ],
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}:\n{self.log_path.read_text()[-3000:]}")
            if not self.url:
                # Bound to port 0: the kernel picks a free port and gunicorn logs which.
                match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", self.log_path.read_text())
                self.url = match.group(1) if match else ""
            if self.url:
                try:
                    if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not become healthy:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class CairnServe:
    """`python -m config.serve`, what `make run` runs, on this test run's database with the fake providers.

    It starts its own broker under `run_dir` (CELERY_BROKER_URL is unset), gunicorn, and a worker with beat inside.
    """

    def __init__(self, *, run_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        from django.conf import settings

        self.run_dir = run_dir
        self.log_path = run_dir / "serve.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            **database_env(),
            "SECRET_KEY": settings.SECRET_KEY,  # the tokens the test issues must verify
            "CAIRN_RUN_DIR": str(run_dir),
            "CELERY_BROKER_URL": "",
            "REDIS_URL": "",
            "RAG_EMBEDDING_PROVIDER": "fake",
            "RAG_EMBEDDING_MODEL": "fake-embedding",
            "RAG_EMBEDDING_DIMENSION": "384",
            "WEB_WORKERS": "2",
            "CELERY_WORKER_CONCURRENCY": "1",
            "API_THROTTLE_USER": "100000/min",
            "API_THROTTLE_RAG": "100000/min",
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> CairnServe:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.serve", "--no-migrate", "--bind", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}:\n{self.log()[-4000:]}")
            if "Cairn is serving" in self.log():
                return self
            time.sleep(0.2)
        self.kill_all()
        raise RuntimeError(f"serve did not start:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def pid(self, service: str) -> int:
        """The pid of a child (`web`, `worker`, `broker`) as the supervisor last wrote it."""
        return int((self.run_dir / f"{service}.pid").read_text())

    def kill(self, service: str) -> int:
        """kill -9 a child and everything it started (its process group); returns the pid killed."""
        pid = self.pid(service)
        os.killpg(pid, signal.SIGKILL)
        return pid

    def wait_restarted(self, service: str, old_pid: int, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pid(service)
            if pid != old_pid and (service != "web" or self.healthy()):
                return pid
            time.sleep(0.2)
        raise AssertionError(f"{service} was not started again:\n{self.log()[-3000:]}")

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM to the supervisor, as Ctrl-C would; its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill_all(self) -> None:
        """kill -9 the supervisor and every child, as a power cut would (PostgreSQL aside)."""
        for name in ("web", "worker", "broker", "serve"):
            try:
                os.killpg(self.pid(name), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
        if self.process is not None:
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                pass


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


def raw_exchange(url: str, request: bytes, *, timeout: float = 10) -> list[RawResponse]:
    """Send `request` as is over a socket and read every response until the server closes the connection."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    responses = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        length = int(headers.get("content-length", len(rest)))
        responses.append(RawResponse(int(status_line.split()[1]), headers, rest[:length]))
        received = rest[length:]
    return responses
