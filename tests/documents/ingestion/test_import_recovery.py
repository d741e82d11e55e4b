"""Import jobs a dead worker or a down broker left behind are run again, each file imported once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from documents.ingestion.jobs import import_job_claim, import_job_create, import_job_run, import_uploads, uploaded_files
from documents.models import Document, ImportJob, ImportStage
from documents.tasks import recover_imports_task
from tests.conftest import ApiFor, Cast, TaskQueue


class WorkerDied(BaseException):
    """Raised from the progress callback: the run stops there, as when its process is killed."""


def test_a_job_cut_short_goes_on_where_it_stopped_and_imports_no_file_twice(cast: Cast, settings: Settings) -> None:
    files = {"a.md": b"# A\n\nFirst.", "empty.md": b"", "c.md": b"# C\n\nThird.", "d.md": b"# D\n\nFourth."}
    uploads = [SimpleUploadedFile(name, data) for name, data in files.items()]
    job = import_job_create(by=cast.alice, collection=cast.handbook, origin="four files", publish=True, uploads=uploads)
    claimed = import_job_claim(job_id=job.pk)
    assert claimed is not None

    def die_after_two(job: ImportJob) -> None:
        if job.files_done == 2:
            raise WorkerDied

    with pytest.raises(WorkerDied):
        import_job_run(job=claimed, files=uploaded_files(claimed), progress=die_after_two)
    assert Document.objects.count() == 1, "the kill came too late to test anything"
    # Its heartbeat stopped with it.
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=settings.IMPORT_LEASE + 1))

    import_uploads(job_id=job.pk)

    job.refresh_from_db()
    assert (job.stage, job.files_total, job.files_done, job.files_failed) == ("indexing", 4, 4, 1)
    rows = sorted(job.files.values_list("path", "outcome"))
    assert rows == [("a.md", "created"), ("c.md", "created"), ("d.md", "created"), ("empty.md", "failed")]
    assert sorted(Document.objects.values_list("title", flat=True)) == ["A", "C", "D"]


def test_a_job_a_live_worker_parses_is_not_claimed_again_but_one_whose_worker_died_is(cast: Cast, settings: Settings) -> None:
    job = import_job_create(by=cast.alice, collection=cast.handbook, origin="x", publish=True)
    assert import_job_claim(job_id=job.pk) is not None
    assert import_job_claim(job_id=job.pk) is None, "a second delivery of the task must not run the job beside the first"
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=settings.IMPORT_LEASE + 1))
    assert import_job_claim(job_id=job.pk) is not None


def post_import(api_for: ApiFor, cast: Cast, capture: DjangoCaptureOnCommitCallbacks, name: str) -> dict:
    body = {"collectionId": str(cast.handbook.pk), "publish": "true", "files": [SimpleUploadedFile(name, b"# " + name.encode())]}
    with capture(execute=True):
        response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
    assert response.status_code == 200, response.content
    return response.json()["data"]


def test_an_import_sent_while_the_broker_is_down_is_kept_and_runs_once_it_is_back(
    cast: Cast,
    api_for: ApiFor,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    import_storage: Path,
) -> None:
    task_queue.down()
    data = post_import(api_for, cast, django_capture_on_commit_callbacks, "during.md")
    assert data["stage"] == "queued"
    job = ImportJob.objects.get(pk=data["id"])
    assert (job.stage, job.enqueued_at) == ("queued", None)
    assert list((import_storage / "uploads").glob("*/*")), "the upload waits on disk for the worker"

    task_queue.up()
    ImportJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert recover_imports_task() == 1
    assert task_queue.waiting() == [("documents.tasks.import_job_task", [str(job.pk)])]
    task_queue.run_waiting()

    job.refresh_from_db()
    assert job.stage in ("indexing", "done")
    assert Document.objects.filter(title="during.md").count() == 1
    assert not list((import_storage / "uploads").glob("*/*")), "the upload is removed once imported"


def test_recovery_sends_the_jobs_no_task_will_run_and_leaves_those_waiting_in_the_queue(
    cast: Cast,
    api_for: ApiFor,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    settings: Settings,
) -> None:
    abandoned, live = (post_import(api_for, cast, django_capture_on_commit_callbacks, f"{n}.md")["id"] for n in ("x", "y"))
    task_queue.purge()  # workers took their tasks
    waiting = post_import(api_for, cast, django_capture_on_commit_callbacks, "waiting.md")["id"]
    task_queue.down()
    unsent = post_import(api_for, cast, django_capture_on_commit_callbacks, "unsent.md")["id"]
    task_queue.up()
    # A long backlog: everything was created and sent long ago; one worker died, the other is alive.
    long_ago = timezone.now() - timedelta(seconds=settings.IMPORT_LEASE + 60)
    ImportJob.objects.update(created_at=long_ago)
    ImportJob.objects.filter(enqueued_at__isnull=False).update(enqueued_at=long_ago)
    ImportJob.objects.filter(pk=abandoned).update(stage=ImportStage.PARSING, heartbeat_at=long_ago)
    ImportJob.objects.filter(pk=live).update(stage=ImportStage.PARSING, heartbeat_at=timezone.now())
    # A job of `import_path` runs in its command's process: never queued, and no worker could read its folder.
    folder = import_job_create(by=cast.alice, collection=cast.handbook, origin="/srv/docs", publish=True)
    ImportJob.objects.filter(pk=folder.pk).update(created_at=long_ago)

    assert recover_imports_task() == 2
    task = "documents.tasks.import_job_task"
    assert sorted(task_queue.waiting()) == sorted([(task, [waiting]), (task, [unsent]), (task, [abandoned])])
    assert recover_imports_task() == 0, "once sent, they wait in the queue like any other"

    # The broker loses what it held (a Redis restarted without its data): with nothing left in the queue,
    # a job sent a lease ago is not waiting there any more.
    task_queue.purge()
    ImportJob.objects.filter(enqueued_at__isnull=False).update(enqueued_at=long_ago)
    assert recover_imports_task() == 3
    assert sorted(task_queue.waiting()) == sorted([(task, [waiting]), (task, [unsent]), (task, [abandoned])])
