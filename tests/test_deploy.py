"""Cairn deployed as docker-compose runs it, without Docker: web and worker are separate processes in working
directories of their own, sharing only an S3 bucket (moto's server on loopback), the Redis broker and PostgreSQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from django.conf import settings
from django.test import Client
from moto.server import ThreadedMotoServer

from permissions.models import TokenScope
from permissions.services import api_token_create
from tests.conftest import Cast
from tests.documents.ingestion.files import make_pdf
from tests.rag.indexing.test_worker import Worker, broker  # noqa: F401  (fixture)
from tests.servers import ROOT, GunicornServer

if TYPE_CHECKING:
    from tests.conftest import TestBroker  # a fixture's type: pytest would try to collect it as a test class

pytestmark = [pytest.mark.worker, pytest.mark.server, pytest.mark.django_db(transaction=True)]

BUCKET, PREFIX = "cairn-imports", "team-files"


@pytest.fixture
def s3_env() -> Iterator[dict[str, str]]:
    """An empty bucket on an S3 server of this test's own, and the settings that point Cairn at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "IMPORT_STORAGE_URL": f"s3://{BUCKET}/{PREFIX}",
        "IMPORT_S3_ENDPOINT_URL": f"http://{host}:{port}",
        "IMPORT_S3_REGION": "us-east-1",
        "IMPORT_S3_ACCESS_KEY_ID": "cairn-test",
        "IMPORT_S3_SECRET_ACCESS_KEY": "cairn-test-secret",
    }
    bucket(env).create()
    try:
        yield env
    finally:
        server.stop()


def bucket(env: dict[str, str]) -> Any:
    return boto3.resource(
        "s3",
        endpoint_url=env["IMPORT_S3_ENDPOINT_URL"],
        region_name=env["IMPORT_S3_REGION"],
        aws_access_key_id=env["IMPORT_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=env["IMPORT_S3_SECRET_ACCESS_KEY"],
    ).Bucket(BUCKET)


def keys(env: dict[str, str], under: str) -> list[str]:
    return sorted(o.key for o in bucket(env).objects.filter(Prefix=f"{PREFIX}/{under}/"))


def wait_for(condition: Callable[[], Any], timeout: float, message: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.25)
    pytest.fail(message)


def test_an_import_posted_to_web_is_parsed_by_a_worker_that_shares_only_the_bucket(
    cast: Cast,
    broker: Any,  # noqa: F811
    test_broker: TestBroker,
    s3_env: dict[str, str],
    tmp_path: Path,
) -> None:
    # Each process gets a working directory and an IMPORT_STORAGE_DIR of its own: were the storage a folder,
    # the worker would look for the upload where web never wrote it.
    web_dir, worker_dir = tmp_path / "web", tmp_path / "worker"
    web_dir.mkdir()
    worker_dir.mkdir()
    shared = {"CELERY_BROKER_URL": test_broker.celery_url, "REDIS_URL": "", **s3_env}
    worker = Worker(test_broker.celery_url, {**shared, "IMPORT_STORAGE_DIR": str(worker_dir / "imports")}, cwd=worker_dir)
    worker.start()
    web = GunicornServer(
        log_path=tmp_path / "gunicorn.log",
        cwd=web_dir,
        # As deployed: production's shape (local settings), queueing on the broker; the test run's key, so its tokens verify.
        extra_env={
            **shared,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "SECRET_KEY": settings.SECRET_KEY,
            "IMPORT_STORAGE_DIR": str(web_dir / "imports"),
        },
    )
    try:
        web.start()
        _import_search_and_download(cast, web.url, s3_env)
        _health_checks_pass(web.url, worker)
    finally:
        web.stop()
        worker.kill()
    assert not (web_dir / "imports").exists() and not (worker_dir / "imports").exists(), "nothing was stored on either disk"


def _import_search_and_download(cast: Cast, url: str, s3_env: dict[str, str]) -> None:
    token = api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    markdown = b"# Lighthouse rota\n\nThe keeper trims the wick at dusk and logs the barometer."
    pdf = make_pdf([["Harbour tide tables"], ["Spring tides follow the full moon."]])
    response = api.post(
        "/api/documents.import",
        data={"collectionId": str(cast.handbook.pk), "publish": "true"},
        files=[("files", ("rota.md", markdown)), ("files", ("tides.pdf", pdf))],
    )
    assert response.status_code == 200, response.text
    job = response.json()["data"]
    assert job["stage"] == "queued", "web only queues the job"
    assert len(keys(s3_env, "uploads")) == 2, "web wrote the uploads to the bucket"

    def finished() -> dict[str, Any] | None:
        info = api.post("/api/jobs.info", json={"id": job["id"]}).json()["data"]
        return info if info["stage"] in ("done", "failed") else None

    done = wait_for(finished, 60, "the worker never finished the import")
    assert (done["stage"], done["filesFailed"]) == ("done", 0), done
    documents = {f["path"]: f["documentId"] for f in done["files"]}
    assert set(documents) == {"rota.md", "tides.pdf"}
    assert keys(s3_env, "uploads") == [], "the uploads are removed from the bucket once imported"
    assert len(keys(s3_env, "originals")) == 2, "the worker kept both originals in the bucket"

    hits = api.post("/api/rag.search", json={"query": "keeper trims the wick", "mode": "keyword"}).json()["data"]
    assert hits and hits[0]["document"]["id"] == documents["rota.md"], "the imported file is searchable"

    browser = Client()
    cast.alice.refresh_from_db()  # the session carries a hash of the password as stored, which web checks
    browser.force_login(cast.alice)
    page = httpx.Client(base_url=url, headers={"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}, timeout=30)
    for path, original in (("rota.md", markdown), ("tides.pdf", pdf)):
        download = page.get(f"/doc/{documents[path]}/original")
        assert (download.status_code, download.content) == (200, original), f"web serves {path} from the bucket"


def _health_checks_pass(url: str, worker: Worker) -> None:
    """The commands docker-compose.yml runs as web's and worker's health checks pass against the live processes."""
    web_check = subprocess.run(
        [sys.executable, "-m", "config.healthcheck", "web", "--url", f"{url}/health"],
        cwd=ROOT,
        env={**os.environ, "ALLOWED_HOSTS": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert web_check.returncode == 0, web_check.stderr
    ping = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "config", "inspect", "ping", "--destination", f"celery@{socket.gethostname()}"],
        cwd=ROOT,
        env=worker.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr
