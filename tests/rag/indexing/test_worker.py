"""A real Redis broker and a real Celery worker process, indexing what the API writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from config.celery import app
from documents.models import Document
from rag.models import Chunk, IndexState, IndexStatus
from tests.conftest import use_broker
from tests.servers import database_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]


class Worker:
    def __init__(self, broker_url: str, extra_env: dict[str, str], args: tuple[str, ...] = (), cwd: Path = ROOT) -> None:
        self.args = args
        self.cwd = cwd
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            **database_env(),
            "PYTHONPATH": str(ROOT),  # the code is found from any working directory
            "CELERY_BROKER_URL": broker_url,
            "RAG_EMBEDDING_PROVIDER": "fake",
            "RAG_EMBEDDING_MODEL": "fake-embedding",
            "RAG_EMBEDDING_DIMENSION": "384",
            **extra_env,
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "--loglevel=" + os.environ.get("CAIRN_WORKER_LOGLEVEL", "warning"),
                "--without-gossip",
                "--without-mingle",
                *self.args,
            ],
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=open(os.environ.get("CAIRN_WORKER_LOG", os.devnull), "ab"),
        )

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def broker(settings, test_broker):
    client = redis.Redis.from_url(test_broker.redis_url)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"these tests need Redis at {test_broker.redis_url} (see README: make test)")
    client.flushdb()
    settings.CELERY_BROKER_URL = test_broker.celery_url
    previous = (app.conf.broker_url, app.conf.task_always_eager)
    use_broker(test_broker.celery_url, eager=False)
    yield client
    use_broker(previous[0], eager=previous[1])
    client.flushdb()


@pytest.fixture
def worker_factory(broker, test_broker) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def make(*args: str, **extra_env: str) -> Worker:
        """A worker with these command-line arguments (`--beat`, say) and settings."""
        worker = Worker(test_broker.celery_url, extra_env, args)
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.kill()


def wait_until(predicate, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    pytest.fail(message)


def fully_indexed(documents) -> bool:
    for document in Document.objects.filter(pk__in=[d.pk for d in documents]):
        status = IndexStatus.objects.filter(document=document, model_id="fake-embedding").first()
        if status is None or status.state != IndexState.INDEXED or status.indexed_version != document.version:
            return False
    return True


def assert_exactly_current_chunks(documents) -> None:
    for document in Document.objects.filter(pk__in=[d.pk for d in documents]):
        rows = list(Chunk.objects.filter(document=document).values_list("chunk_index", "document_version"))
        assert rows, f"{document.title} has no chunks"
        assert {v for _, v in rows} == {document.version}, f"{document.title} has chunks of another version"
        indexes = sorted(i for i, _ in rows)
        assert indexes == list(range(len(indexes))), f"{document.title} has duplicate or missing chunk indexes"


def test_the_worker_leaves_exactly_the_current_versions_chunks(cast, api_for, worker_factory):
    worker = worker_factory()
    worker.start()
    alice = api_for(cast.alice)
    ids = []
    for i in range(4):
        response = alice.post(
            "documents.create",
            {
                "title": f"Doc {i}",
                "text": f"# Doc {i}\n\nFirst draft about topic {i}.",
                "collectionId": str(cast.handbook.id),
                "publish": True,
            },
        )
        ids.append(response.json()["data"]["id"])
    for round_ in range(3):  # rapid edits
        for doc_id in ids:
            alice.post(
                "documents.update",
                {
                    "id": doc_id,
                    "text": f"# Revised\n\nRevision {round_} of {doc_id}.\n\n" + "More words here. " * 30 * (round_ + 1),
                },
            )
    documents = list(Document.objects.filter(pk__in=ids))
    wait_until(lambda: fully_indexed(documents), 60, "the worker did not index every document at its current version")
    assert_exactly_current_chunks(documents)
    assert all(d.version == 4 for d in Document.objects.filter(pk__in=ids))
    assert all(
        "Revision 2" in c for c in Chunk.objects.filter(document_id__in=ids, chunk_index=0).values_list("chunk_text", flat=True)
    )


def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(cast, worker_factory, broker):
    from rag import tasks

    documents = [
        Document.objects.create(
            team=cast.alice.team,
            collection=cast.handbook,
            title=f"Batch {i}",
            created_by=cast.alice,
            text=f"# Batch {i}\n\n" + f"Paragraph {i} about things. " * 60,
            published_at=cast.handbook.created_at,
        )
        for i in range(12)
    ]
    # Slow embedding and a short visibility timeout, so the kill lands mid-batch and the
    # unacknowledged task is redelivered quickly.
    slow = {"RAG_FAKE_EMBED_DELAY": "0.5", "CELERY_TASK_TIME_LIMIT": "6", "CELERY_TASK_SOFT_TIME_LIMIT": "5"}
    first = worker_factory(**slow)
    first.start()
    for start in range(0, 12, 4):
        tasks.index_batch_task.delay([str(d.pk) for d in documents[start : start + 4]])
    wait_until(lambda: IndexStatus.objects.filter(state=IndexState.EMBEDDING).exists(), 30, "indexing never started")
    first.kill()
    assert not fully_indexed(documents), "the kill came too late to test anything"
    second = worker_factory(**slow)
    second.start()
    wait_until(lambda: fully_indexed(documents), 90, "documents were lost after the worker was killed")
    assert_exactly_current_chunks(documents)
    assert Chunk.objects.filter(document__deleted_at__isnull=False).count() == 0


def test_an_index_task_whose_database_connection_drops_is_retried_and_the_document_becomes_searchable(
    cast, api_for, worker_factory, broker
):
    from django.db import connection

    alice = api_for(cast.alice)

    def create(title: str, text: str) -> str:
        body = {"title": title, "text": f"# {title}\n\n{text}", "collectionId": str(cast.handbook.id), "publish": True}
        return alice.post("documents.create", body).json()["data"]["id"]

    # Slow embedding: the connection drops while the task holds the document, between its queries.
    worker_factory(RAG_FAKE_EMBED_DELAY="2").start()
    # A first document, indexed, and nothing left in the queue: the reconciliation a starting worker
    # queues has run, so only a retry can index the second one in time.
    first = create("Bats", "Bats sleep by day.")
    idle = {"polls": 0}

    def settled() -> bool:
        quiet = (
            fully_indexed(Document.objects.filter(pk=first))
            and not broker.llen("interactive")
            and not broker.llen("bulk")
            and not broker.hlen("unacked")
        )
        idle["polls"] = idle["polls"] + 1 if quiet else 0
        return idle["polls"] >= 2

    wait_until(settled, 60, "the worker never indexed the first document")
    document_id = create("Owls", "Owls hunt at night.")
    embedding = IndexStatus.objects.filter(document_id=document_id, state=IndexState.EMBEDDING)
    wait_until(embedding.exists, 30, "indexing never started")
    # What a database restart, a failover or a proxy's cut does to the worker: its connections end mid-task.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1, "the worker had no connection to end"
    assert embedding.exists(), "the task finished before its connection dropped: nothing was tested"

    document = Document.objects.get(pk=document_id)
    wait_until(lambda: fully_indexed([document]), 30, "the task was not retried after its connection dropped")
    assert_exactly_current_chunks([document])
    hits = api_for(cast.bob).post("rag.search", {"query": "owls hunt", "mode": "keyword"}).json()["data"]
    assert [h["document"]["id"] for h in hits] == [document_id]


def test_after_a_model_change_search_keeps_the_old_model_until_the_backfill_covers_the_team(
    cast, api_for, worker_factory, settings
):
    from django.core.management import call_command

    from rag.indexing.pipeline import index_documents
    from rag.models import IndexJob, JobState, ServingModel
    from rag.providers.embeddings import reset_provider_cache
    from rag.retrieval.search import search

    handbook = [
        Document.objects.create(
            team=cast.alice.team,
            collection=cast.handbook,
            title=f"Field notes {i}",
            created_by=cast.alice,
            text=f"# Field notes {i}\n\n" + f"Owls and bees seen on walk {i}. " * 40,
            published_at=cast.handbook.created_at,
        )
        for i in range(8)
    ]
    private = Document.objects.create(
        team=cast.alice.team,
        collection=cast.private,
        title="Salaries",
        created_by=cast.alice,
        text="# Salaries\n\nOwls and bees are paid in honey.",
        published_at=cast.handbook.created_at,
    )
    index_documents(document_ids=[d.pk for d in [*handbook, private]])
    assert ServingModel.objects.get(team=cast.alice.team).model_id == "fake-embedding"

    # The operator configures another model (another dimension too) and restarts the worker.
    settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_DIMENSION = "fake-embedding-v2", 256
    reset_provider_cache()
    # Slow embedding: the backfill's one embedding call takes seconds, and the searches below land inside it.
    new_model = {"RAG_EMBEDDING_MODEL": "fake-embedding-v2", "RAG_EMBEDDING_DIMENSION": "256"}
    worker = worker_factory(**new_model, RAG_FAKE_EMBED_DELAY="8")
    worker.start()
    wait_until(
        lambda: IndexStatus.objects.filter(model_id="fake-embedding-v2", state=IndexState.EMBEDDING).exists(),
        60,
        "the worker started no backfill",
    )

    response = api_for(cast.bob).post("rag.search", {"query": "owls and bees", "limit": 5, "threshold": 0})
    hits = response.json()["data"]
    assert len(hits) == 5, "search during the backfill answers with the old model: never an empty page"
    assert all(hit["document"]["title"].startswith("Field notes") for hit in hits), "bob never sees the private collection"
    during = search(user=cast.alice, query="owls and bees", mode="hybrid", threshold=0.0)
    assert during.model is not None and during.model.model_id == "fake-embedding"
    status = api_for(cast.alice).post("rag.status").json()["data"]
    assert status["model"] == "fake-embedding"
    assert status["backfill"]["model"] == "fake-embedding-v2"
    assert status["backfill"]["done"] < status["backfill"]["total"] == 9
    assert api_for(cast.charlie).post("rag.search", {"query": "owls and bees"}).json()["error"] == "no_embeddings"
    call_command("cleanup_embeddings")
    assert Chunk.objects.filter(model_id="fake-embedding").exists(), "cleanup keeps a model a team is searched with"

    wait_until(
        lambda: ServingModel.objects.get(team=cast.alice.team).model_id == "fake-embedding-v2",
        120,
        "the team never switched to the new model",
    )
    after = search(user=cast.alice, query="owls and bees", mode="hybrid", threshold=0.0)
    assert after.model is not None and after.model.model_id == "fake-embedding-v2"
    assert after.hits and set(
        Chunk.objects.filter(pk__in=[h.chunk_id for h in after.hits]).values_list("model_id", flat=True)
    ) == {"fake-embedding-v2"}
    wait_until(lambda: IndexJob.objects.get(backfill=True).state == JobState.DONE, 60, "the backfill job never finished")
    assert api_for(cast.alice).post("rag.status").json()["data"]["backfill"] is None

    call_command("cleanup_embeddings")
    assert not Chunk.objects.filter(model_id="fake-embedding").exists()
    assert len(api_for(cast.bob).post("rag.search", {"query": "owls and bees", "limit": 5}).json()["data"]) == 5


def test_a_worker_serving_the_interactive_queue_indexes_an_edit_while_a_bulk_backlog_waits(cast, api_for, worker_factory, broker):
    from config.broker import queue_length
    from rag.tasks import enqueue_reindex

    def document(title: str) -> Document:
        return Document.objects.create(
            team=cast.alice.team,
            collection=cast.handbook,
            title=title,
            created_by=cast.alice,
            text=f"# {title}\n\nFirst draft.",
            published_at=cast.handbook.created_at,
        )

    backlog = [document(f"Imported {i}") for i in range(40)]
    batches = enqueue_reindex([d.pk for d in backlog])  # as an import or a backfill queues them
    assert batches == len(backlog) and queue_length(app, "bulk") == 2
    edited = document("Edited")
    worker = worker_factory("--queues=interactive")
    worker.start()
    response = api_for(cast.alice).post("documents.update", {"id": str(edited.pk), "text": "# Edited\n\nThe second draft."})
    assert response.status_code == 200, response.content
    started = time.monotonic()
    wait_until(lambda: fully_indexed([edited]), 15, "the edit was not indexed while a bulk backlog waited")
    print(f"edit indexed {time.monotonic() - started:.1f} s after the save")
    assert "second draft" in Chunk.objects.get(document=edited, chunk_index=0).chunk_text
    assert queue_length(app, "bulk") >= 2, "the interactive worker must leave the bulk queue alone"
    assert not IndexStatus.objects.filter(document__in=backlog, state=IndexState.INDEXED).exists()
