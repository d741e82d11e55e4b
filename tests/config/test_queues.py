"""Queues by the wait a person can bear: an edit's indexing goes to `interactive`, batches to `bulk` (the real app's routes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from config.celery import app, empty_queues, queue_is_empty
from config.metrics import BrokerCollector
from documents import services
from documents.ingestion.jobs import import_job_create, import_uploads
from documents.models import Document
from rag.models import IndexState, IndexStatus
from tests.conftest import ApiFor, Cast, TaskQueue

INTERACTIVE, BULK = "interactive", "bulk"


@pytest.fixture
def imports(settings: Settings, tmp_path: Path) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "imports": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}},
    }


def routed_to(task_name: str) -> str:
    return app.amqp.router.route({}, task_name, (), {})["queue"].name


def test_one_documents_tasks_are_routed_to_the_interactive_queue_and_every_other_task_to_bulk() -> None:
    ours = sorted(name for name in app.tasks if name.split(".")[0] in ("rag", "connectors", "documents", "permissions", "config"))
    assert {"rag.tasks.backfill_task", "documents.tasks.import_job_task", "connectors.tasks.sync_source_task"} <= set(ours)
    interactive = {
        "rag.tasks.index_document_task",
        "rag.tasks.remove_document_task",
        # Beat's short passes that an edit waits on: finding its lost task, copying its vectors to Milvus.
        "rag.tasks.recover_index_task",
        "rag.tasks.drain_vector_outbox_task",
    }
    assert {name: routed_to(name) for name in ours} == {name: INTERACTIVE if name in interactive else BULK for name in ours}
    # The rest of what beat sends (reconciliation, the other recovery passes) holds up no edit.
    beat = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {routed_to(name) for name in beat - interactive} == {BULK} and "rag.tasks.recover_index_task" in beat
    # A worker started without -Q serves both.
    assert [queue.name for queue in app.conf.task_queues] == [INTERACTIVE, BULK]


def test_an_edit_is_indexed_from_the_interactive_queue_and_an_imports_documents_from_the_bulk_one(
    cast: Cast,
    api_for: ApiFor,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    imports: None,
) -> None:
    alice = api_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        created = alice.post(
            "documents.create", {"title": "Edit", "text": "# Edit\n\nOne.", "collectionId": str(cast.handbook.id)}
        )
    edited = created.json()["data"]["id"]
    assert task_queue.waiting(INTERACTIVE) == [("rag.tasks.index_document_task", [edited, False])]
    assert task_queue.waiting(BULK) == []
    task_queue.purge()

    uploads = [SimpleUploadedFile(f"{n}.md", f"# File {n}\n\nText {n}.".encode()) for n in range(3)]
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(by=cast.alice, collection=cast.handbook, origin="three files", publish=True, uploads=uploads)
    with django_capture_on_commit_callbacks(execute=True):
        import_uploads(job_id=job.pk)  # as the worker runs it
    imported = {str(pk) for pk in Document.objects.filter(title__startswith="File").values_list("pk", flat=True)}
    assert len(imported) == 3
    assert task_queue.waiting(INTERACTIVE) == [], "an import's documents must not wait in front of an edit"
    # In one task for the three: a batch's documents are indexed together (full embedding batches, one transaction).
    assert [(name, set(args[0])) for name, args in task_queue.waiting(BULK) if name.startswith("rag.tasks.index")] == [
        ("rag.tasks.index_batch_task", imported)
    ]

    # Removal likewise: one document's from `interactive`, a batch's from `bulk`.
    task_queue.purge()
    with django_capture_on_commit_callbacks(execute=True):
        services.document_delete(document=Document.objects.get(pk=edited))
        services.documents_delete(documents=Document.objects.filter(pk__in=imported))
    assert task_queue.waiting(INTERACTIVE) == [("rag.tasks.remove_document_task", [edited])]
    assert sorted(args[0] for _, args in task_queue.waiting(BULK)) == sorted(imported)


def test_a_batchs_documents_are_queued_a_batch_at_a_time_as_they_commit_and_the_rest_when_it_ends(
    cast: Cast,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    imports: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("rag.tasks.REINDEX_BATCH", 2)
    uploads = [SimpleUploadedFile(f"{n}.md", f"# Batch {n}\n\nText {n}.".encode()) for n in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(by=cast.alice, collection=cast.handbook, origin="five files", publish=True, uploads=uploads)
    with django_capture_on_commit_callbacks(execute=True):
        import_uploads(job_id=job.pk)
    imported = {str(pk) for pk in Document.objects.filter(title__startswith="Batch").values_list("pk", flat=True)}
    batches = [args[0] for name, args in task_queue.waiting(BULK) if name == "rag.tasks.index_batch_task"]
    assert sorted(map(len, batches)) == [1, 2, 2] and {pk for batch in batches for pk in batch} == imported
    # Marked queued: the recovery pass leaves them to their tasks.
    assert not IndexStatus.objects.filter(document_id__in=imported, queued_at__isnull=True).exists()


def test_the_recovery_passes_and_the_metrics_see_every_queue(task_queue: TaskQueue, settings: Settings) -> None:
    from rag.tasks import enqueue_removal

    settings.CELERY_TASK_ALWAYS_EAGER = False
    assert queue_is_empty()
    enqueue_removal("00000000-0000-0000-0000-000000000001")  # waits in `interactive` only
    assert not queue_is_empty(), "a task waiting in the interactive queue is a task in the queue"
    (messages,) = [family for family in BrokerCollector(app).collect() if family.name == "cairn_queue_messages"]
    assert {sample.labels["queue"]: sample.value for sample in messages.samples} == {INTERACTIVE: 1, BULK: 0}


@pytest.mark.parametrize("edit_waits", [True, False])
def test_a_batch_task_gives_way_to_an_edit_waiting_in_the_interactive_queue(
    cast: Cast, task_queue: TaskQueue, monkeypatch: pytest.MonkeyPatch, edit_waits: bool
) -> None:
    from rag import tasks
    from rag.models import Chunk
    from tests.factories import DocumentFactory

    monkeypatch.setattr("rag.tasks.BATCH_GROUP", 1)
    ids = [
        str(DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title=f"Doc {n}", text=f"Text {n}.").pk)
        for n in range(3)
    ]
    tasks.enqueue_bulk_index(ids)  # as an import queues them: pending, their task sent
    task_queue.purge()  # run below instead
    if edit_waits:
        tasks.index_document_task.apply_async(("an edit's document", False), queue=INTERACTIVE)

    outcome = tasks.index_batch_task.apply(args=(ids,)).get()

    indexed = {str(pk) for pk in Chunk.objects.filter(document_id__in=ids).values_list("document_id", flat=True)}
    if edit_waits:
        # The first document indexed, the other two queued again behind the edit, still pending with a task queued
        # (so the recovery pass leaves them to it).
        assert outcome == {"indexed": 1, "failed": 0, "queued_again": 2} and indexed == {ids[0]}
        assert task_queue.waiting(BULK) == [("rag.tasks.index_batch_task", [ids[1:], None, False])]
        rest = IndexStatus.objects.filter(document_id__in=ids[1:])
        assert {(s.state, s.queued_at is not None) for s in rest} == {(IndexState.PENDING, True)} and rest.count() == 2
    else:
        assert outcome == {"indexed": 3, "failed": 0, "queued_again": 0} and indexed == set(ids)
        assert task_queue.waiting(BULK) == []


def test_an_edit_whose_task_was_lost_is_queued_again_in_the_interactive_queue_while_an_import_fills_bulk(
    cast: Cast, task_queue: TaskQueue, settings: Settings
) -> None:
    """A worker took the edit's task and died: its queue is empty now, so recovery sends it there again, without
    waiting for the bulk queue (an import's batches) to drain; a batch document's task still in its queue is left."""
    from datetime import timedelta

    from django.utils import timezone

    from rag import tasks
    from tests.factories import DocumentFactory

    settings.CELERY_TASK_ALWAYS_EAGER = False
    long_ago = timezone.now() - timedelta(minutes=5)
    edit, imported = (
        DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title=title, text=f"{title}.")
        for title in ("Edited", "Imported")
    )
    Document.objects.filter(pk__in=[edit.pk, imported.pk]).update(updated_at=long_ago)
    for document, queue in ((edit, INTERACTIVE), (imported, BULK)):
        IndexStatus.objects.update_or_create(
            document=document,
            model_id=settings.RAG_EMBEDDING_MODEL,
            defaults={"state": IndexState.PENDING, "updated_at": long_ago, "queued_at": long_ago, "queue": queue},
        )
    task_queue.purge()
    tasks.index_batch_task.apply_async(([str(imported.pk)], None, False), queue=BULK)  # the import's, still waiting
    assert empty_queues() == {INTERACTIVE}

    assert tasks.recover_index(lease=60) == 1
    assert task_queue.waiting(INTERACTIVE) == [("rag.tasks.index_batch_task", [[str(edit.pk)], None, False])]
    assert task_queue.waiting(BULK) == [("rag.tasks.index_batch_task", [[str(imported.pk)], None, False])]
    status = IndexStatus.objects.get(document=edit)
    assert status.queued_at is not None and status.queued_at > long_ago
    assert (status.state, status.queue) == (IndexState.PENDING, INTERACTIVE)
    # Queued again a moment ago: the next pass leaves it to that task.
    assert tasks.recover_index(lease=60) == 0

    # With every queue empty, a task queued before the queue was recorded is taken as lost too.
    task_queue.purge()
    IndexStatus.objects.filter(document=imported).update(queued_at=long_ago, queue="")
    assert empty_queues() == {INTERACTIVE, BULK, ""}
    assert tasks.recover_index(lease=60) == 1
    assert task_queue.waiting(BULK) == [("rag.tasks.index_batch_task", [[str(imported.pk)], None, False])]
