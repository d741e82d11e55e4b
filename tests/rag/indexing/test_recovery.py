"""Recovery queues again what no task holds, and only that: never a document waiting in the queue."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from documents.models import Document
from rag import tasks
from rag.models import IndexState, IndexStatus
from tests.conftest import ApiFor, Cast, TaskQueue


def create(api_for: ApiFor, cast: Cast, capture: DjangoCaptureOnCommitCallbacks, title: str) -> str:
    body = {"title": title, "text": f"# {title}\n\nOwls hunt at night.", "collectionId": str(cast.handbook.id), "publish": True}
    with capture(execute=True):
        response = api_for(cast.alice).post("documents.create", body)
    assert response.status_code == 200, response.content
    return response.json()["data"]["id"]


def queued_ids(queue: TaskQueue) -> list[str]:
    """The documents the waiting indexing tasks will read, once per task that reads them."""
    ids: list[str] = []
    for name, args in queue.waiting():
        ids += [args[0]] if name == "rag.tasks.index_document_task" else args[0]
    return sorted(ids)


def test_recovery_and_reconciliation_leave_a_backlog_in_the_queue_and_queue_only_what_no_task_holds(
    cast: Cast,
    api_for: ApiFor,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    settings: Settings,
) -> None:
    abandoned = create(api_for, cast, django_capture_on_commit_callbacks, "Left embedding by a dead worker")
    task_queue.purge()  # a worker took its task, and died
    IndexStatus.objects.filter(document_id=abandoned).update(state=IndexState.EMBEDDING)
    task_queue.down()
    unsent = create(api_for, cast, django_capture_on_commit_callbacks, "Saved while the broker was down")
    task_queue.up()
    backlog = [create(api_for, cast, django_capture_on_commit_callbacks, f"Backlog {n}") for n in range(5)]
    # A long load: the backlog has waited an hour, and the dead worker's heartbeat stopped as long ago.
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Document.objects.update(updated_at=an_hour_ago)
    IndexStatus.objects.update(updated_at=an_hour_ago)
    assert queued_ids(task_queue) == sorted(backlog)

    assert tasks.recover_index_task() == 2
    tasks.reconcile_index_task()
    tasks.recover_index_task()

    assert queued_ids(task_queue) == sorted([*backlog, unsent, abandoned]), "each document is in the queue once"
    assert set(IndexStatus.objects.values_list("state", flat=True)) == {IndexState.PENDING}

    # The broker loses what it held (a Redis restarted without its data): with nothing left in the queue,
    # a document queued a lease ago is not waiting there any more.
    task_queue.purge()
    IndexStatus.objects.update(updated_at=an_hour_ago, queued_at=an_hour_ago)
    assert tasks.recover_index_task() == 7
    assert queued_ids(task_queue) == sorted([*backlog, unsent, abandoned])


def test_a_document_saved_while_the_broker_is_down_is_saved_and_indexed_once_it_is_back(
    cast: Cast,
    api_for: ApiFor,
    task_queue: TaskQueue,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    settings: Settings,
) -> None:
    task_queue.down()
    document_id = create(api_for, cast, django_capture_on_commit_callbacks, "Owls")
    assert IndexStatus.objects.get(document_id=document_id).state == IndexState.PENDING

    task_queue.up()
    assert tasks.recover_index_task() == 0, "within its lease, the save's own task may still be on its way"
    # A minute later, the broker back: the next recovery pass (every RAG_RECOVER_INTERVAL seconds) queues it.
    a_minute_ago = timezone.now() - timedelta(minutes=1)
    Document.objects.filter(pk=document_id).update(updated_at=a_minute_ago)
    IndexStatus.objects.update(updated_at=a_minute_ago)
    assert tasks.recover_index_task() == 1
    task_queue.run_waiting()

    assert IndexStatus.objects.get(document_id=document_id).state == IndexState.INDEXED
    hits = api_for(cast.bob).post("rag.search", {"query": "owls hunt", "mode": "keyword"}).json()["data"]
    assert [h["document"]["id"] for h in hits] == [document_id]


def test_a_reindex_asked_for_while_the_broker_is_down_is_a_clear_503(
    cast: Cast, api_for: ApiFor, task_queue: TaskQueue, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    document_id = create(api_for, cast, django_capture_on_commit_callbacks, "Owls")
    task_queue.down()
    response = api_for(cast.alice).post("rag.embed", {"documentId": document_id})
    assert (response.status_code, response.json()["error"]) == (503, "queue_unavailable")
