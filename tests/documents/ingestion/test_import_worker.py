"""A real Redis broker and Celery worker: the request only queues the job, the worker parses and indexes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.db.models import Count

from documents.models import Document, ImportJob, Source
from rag.models import IndexState, IndexStatus
from tests.conftest import ApiFor, Cast
from tests.documents.ingestion.files import make_docx, make_pdf
from tests.rag.indexing.test_worker import (  # noqa: F401  (fixtures)
    Worker,
    assert_exactly_current_chunks,
    broker,
    fully_indexed,
    wait_until,
    worker_factory,
)

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


# A dead worker's job is noticed once its heartbeat is a lease old: seconds here, to keep the test short.
FAST_RECOVERY = {"TASK_HEARTBEAT_INTERVAL": "1", "IMPORT_LEASE": "3", "IMPORT_RECOVER_INTERVAL": "1"}


@contextmanager
def row_locked(document: Document) -> Iterator[None]:
    """Hold the document's row lock from a connection of its own while the block runs: a write to it waits."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Document.objects.select_for_update().get(pk=document.pk)
                locked.set()
                release.wait(60)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10), "could not lock the row"
    try:
        yield
    finally:
        release.set()
        thread.join(10)


def test_a_worker_killed_mid_import_leaves_a_job_that_finishes_with_every_file_once(
    cast: Cast,
    api_for: ApiFor,
    worker_factory: Callable[..., Worker],  # noqa: F811
    import_storage: Path,
    tmp_path: Path,
) -> None:
    names = [f"note-{n:02}.md" for n in range(30)]
    # An earlier import of note-15.md: while the test holds its document's row, the worker's new version
    # of it waits, so the kill lands mid-import, fifteen files in.
    held = Document.objects.create(
        team=cast.handbook.team, collection=cast.handbook, title="Old note", text="# Old note", created_by=cast.alice
    )
    Source.objects.create(
        team=cast.handbook.team,
        document=held,
        document_version=1,
        collection=cast.handbook,
        path="note-15.md",
        filename="note-15.md",
        format="markdown",
        size=10,
        sha256="0" * 64,
    )
    env = {"IMPORT_STORAGE_DIR": str(import_storage), **FAST_RECOVERY}
    first = worker_factory(**env)
    first.start()
    body = {
        "collectionId": str(cast.handbook.pk),
        "publish": "true",
        "files": [SimpleUploadedFile(name, f"# Note {name}\n\nAbout {name}.".encode()) for name in names],
    }
    with row_locked(held):
        response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
        assert response.status_code == 200
        job_id = response.json()["data"]["id"]
        imported = Document.objects.filter(title__startswith="Note note-")
        wait_until(lambda: imported.count() >= 15, 60, "the worker never got going")
        first.kill()
    assert ImportJob.objects.get(pk=job_id).stage == "parsing", "the kill came too late to test anything"

    # Beat runs inside the new worker, with its recovery pass every second.
    worker_factory("--beat", f"--schedule={tmp_path / 'beat-schedule'}", **env).start()

    def stage() -> str:
        return api_for(cast.alice).post("jobs.info", {"id": job_id}).json()["data"]["stage"]

    wait_until(lambda: stage() == "done", 120, "the job of the killed worker never finished")
    job = ImportJob.objects.get(pk=job_id)
    assert (job.files_total, job.files_done, job.files_failed) == (30, 30, 0)
    outcomes = dict(job.files.values_list("path", "outcome"))
    assert (len(outcomes), job.files.count()) == (30, 30), "each file is recorded once"
    assert outcomes == {name: "updated" if name == "note-15.md" else "created" for name in names}
    assert Document.objects.count() == 30, "no file became two documents"
    assert not Source.objects.values("path").annotate(n=Count("document", distinct=True)).filter(n__gt=1).exists()
    documents = list(Document.objects.all())
    assert fully_indexed(documents)
    assert_exactly_current_chunks(documents)
    assert not list((import_storage / "uploads").glob("*/*")), "the uploads are removed once imported"
