"""config.healthcheck, the commands docker-compose.yml runs as web's and beat's health checks.

(Against live gunicorn and worker processes: tests/test_deploy.py.)"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from config.healthcheck import beat, host_header, main, web
from tests.servers import free_port


@pytest.mark.parametrize(
    ("allowed_hosts", "host"),
    [
        ("cairn.example.com,localhost", "cairn.example.com"),
        (".example.com", "example.com"),
        ("*", "localhost"),
        ("", "localhost"),
    ],
)
def test_the_web_check_names_a_host_allowed_hosts_accepts(allowed_hosts: str, host: str) -> None:
    assert host_header(allowed_hosts) == host


class Health(BaseHTTPRequestHandler):
    status = 200
    hosts: list[str] = []

    def do_GET(self) -> None:
        self.hosts.append(self.headers["Host"])
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(b'{"status": "error", "database": "error: OperationalError"}')

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def health_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/health"
    server.shutdown()
    Health.status, Health.hosts = 200, []


def test_the_web_check_passes_on_200_sending_an_allowed_host(health_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALLOWED_HOSTS", "cairn.example.com")
    assert web(health_url) is None
    assert Health.hosts == ["cairn.example.com"]


def test_the_web_check_fails_on_503_with_the_reason(health_url: str) -> None:
    Health.status = 503
    problem = web(health_url)
    assert problem and "answered 503" in problem and "OperationalError" in problem


def test_the_web_check_fails_when_nothing_listens() -> None:
    problem = web(f"http://127.0.0.1:{free_port()}/health")
    assert problem and "did not answer" in problem


def test_the_beat_check_passes_while_the_schedule_file_is_fresh(tmp_path: Path) -> None:
    (tmp_path / "celerybeat-schedule.db").write_bytes(b"")
    assert beat(tmp_path / "celerybeat-schedule", max_age=300) is None


def test_the_beat_check_fails_when_beat_stopped_writing_its_schedule(tmp_path: Path) -> None:
    schedule = tmp_path / "celerybeat-schedule"
    schedule.write_bytes(b"")
    an_hour_ago = time.time() - 3600
    os.utime(schedule, (an_hour_ago, an_hour_ago))
    problem = beat(schedule, max_age=300)
    assert problem and "last written 3600 s ago" in problem


def test_the_beat_check_fails_before_beat_wrote_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["beat", "--schedule", str(tmp_path / "celerybeat-schedule")]) == 1
    assert "no schedule file" in capsys.readouterr().err
