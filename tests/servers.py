"""Cairn under gunicorn in a subprocess, pointed at this test run's database, for tests over real HTTP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    """`gunicorn config.wsgi` as deployed (gthread workers), with the test settings and the fake providers."""

    def __init__(self, *, log_path: Path, extra_env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            **database_env(),
            "RAG_EMBEDDING_PROVIDER": "fake",
            "RAG_EMBEDDING_MODEL": "fake-embedding",
            "RAG_EMBEDDING_DIMENSION": "384",
            "CAIRN_TEST_LLM_MODEL": "fake-llm",
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
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--worker-class",
                "gthread",
                "--threads",
                "4",
                "--timeout",
                "60",
                "--log-level",
                "info",
                "--no-control-socket",
            ],
            cwd=ROOT,
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
