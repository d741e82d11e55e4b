"""A real Redis broker and Celery worker: sources.create only queues the first sync, the worker runs it on the
bulk queue, decrypting the source's secrets with the key both processes are configured with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pytest_django import Settings

from connectors.models import SourceSync
from documents.models import Document
from tests.conftest import ApiFor, Cast
from tests.connectors.conftest import write
from tests.rag.indexing.test_worker import Worker, broker, wait_until, worker_factory  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_worker_runs_the_sync_that_the_request_only_queued(
    cast: Cast,
    api_for: ApiFor,
    root: Path,
    settings: Settings,
    worker_factory: Callable[..., Worker],  # noqa: F811
) -> None:
    key = Fernet.generate_key().decode()
    settings.CONNECTORS_SECRET_KEY = [key]
    write(root, {"guide.md": "# Guide\n\nDeploy with make deploy.\n", "faq.md": "# FAQ\n\nAsk in the channel.\n"})
    body = {
        "name": "Wiki",
        "kind": "folder",
        "collectionId": str(cast.handbook.pk),
        "config": {"path": str(root)},
        "secrets": {"token": "t0ken"},
    }
    response = api_for(cast.alice).post("sources.create", body)
    assert response.status_code == 200, response.content
    sync = SourceSync.objects.get()
    assert (sync.stage, Document.objects.count()) == ("queued", 0), "nothing is synced before a worker takes it"

    worker_factory(CONNECTORS_SECRET_KEY=key, CONNECTORS_LOCAL_ROOTS=str(root)).start()
    wait_until(lambda: SourceSync.objects.get().stage in ("indexing", "done", "failed"), 60, "the worker never ran the sync")
    sync.refresh_from_db()
    assert (sync.stage in ("indexing", "done"), sync.created, sync.error) == (True, 2, "")
    assert sorted(Document.objects.values_list("title", flat=True)) == ["FAQ", "Guide"]

    def info() -> dict:
        return api_for(cast.alice).post("sources.info", {"id": response.json()["data"]["id"]}).json()["data"]

    wait_until(lambda: info()["lastSync"]["stage"] == "done", 60, "the sync never reported its documents indexed")
