"""A real Redis broker and Celery worker: the request only queues the job, the worker parses and indexes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Document, ImportJob
from rag.models import IndexState, IndexStatus
from tests.conftest import ApiFor, Cast
from tests.documents.ingestion.files import make_docx, make_pdf
from tests.rag.indexing.test_worker import Worker, broker, wait_until, worker_factory  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_worker_parses_an_upload_that_the_request_only_queued(
    cast: Cast,
    api_for: ApiFor,
    worker_factory: Callable[..., Worker],  # noqa: F811
    import_storage: Path,
) -> None:
    body = {
        "collectionId": str(cast.handbook.pk),
        "publish": "true",
        "files": [
            SimpleUploadedFile("report.pdf", make_pdf([["Quarterly report"], ["Page two"]])),
            SimpleUploadedFile("runbook.docx", make_docx()),
        ],
    }
    response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
    assert (response.status_code, response.json()["data"]["stage"]) == (200, "queued")
    job = ImportJob.objects.get()
    assert (job.stage, Document.objects.count()) == ("queued", 0), "nothing is parsed before a worker takes the job"

    worker_factory(IMPORT_STORAGE_DIR=str(import_storage)).start()
    wait_until(lambda: ImportJob.objects.get().stage in ("indexing", "done", "failed"), 60, "the worker never ran the import")
    job.refresh_from_db()
    assert (job.stage in ("indexing", "done"), job.files_total, job.files_failed) == (True, 2, 0)
    titles = sorted(Document.objects.values_list("title", flat=True))
    assert titles == ["Deployment runbook", "Quarterly report"]
    wait_until(
        lambda: IndexStatus.objects.filter(state=IndexState.INDEXED).count() == 2, 60, "the imported documents were not indexed"
    )

    def job_info() -> dict:
        return api_for(cast.alice).post("jobs.info", {"id": str(job.pk)}).json()["data"]

    # Two "indexed" status rows are not yet the job's own condition (each of its documents indexed at its current
    # version, checked when the job is read): wait for that, as a client polling jobs.info does.
    wait_until(lambda: job_info()["stage"] == "done", 60, "the import job never reported done")
    info = job_info()
    assert info["stage"] == "done"
    assert not list((import_storage / "uploads").glob("*/*")), "the uploads are removed once imported"
