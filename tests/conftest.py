from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from django.test import Client
from rest_framework.test import APIClient

from documents.models import Collection
from permissions.models import Access, Role, TeamRole, TokenScope, User
from permissions.services import api_token_create
from tests.factories import (
    CollectionFactory,
    CollectionMembershipFactory,
    TeamFactory,
    UserFactory,
)

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class TestBroker:
    """The Redis the tests' Celery workers use: `celery_url` for Celery, `redis_url` for redis-py."""

    celery_url: str
    redis_url: str


@pytest.fixture(scope="session")
def test_broker(worker_id: str) -> Iterator[TestBroker]:
    """CAIRN_TEST_BROKER_URL when set; otherwise a Redis of the tests' own (as `make run` starts one), on a socket under var/."""
    url = os.environ.get("CAIRN_TEST_BROKER_URL")
    if url:
        yield TestBroker(celery_url=url, redis_url=url)
        return
    from config.broker import EmbeddedRedis

    # Under pytest-xdist each worker has its own Redis, so one worker's Celery never takes another's tasks.
    # `worker_id` is pytest-xdist's ("gw0", "gw1", …; "master" in one process); not the environment's
    # PYTEST_XDIST_WORKER, which a pytest run started by a test inherits.
    name = "test-redis" + (f"-{worker_id}" if worker_id != "master" else "")
    server = EmbeddedRedis(ROOT / "var" / name, persist=False)
    process = server.start(log=ROOT / "var" / f"{name}.log")
    try:
        yield TestBroker(celery_url=server.celery_url(15), redis_url=server.cache_url(15))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


# Tests that start processes (servers, workers, Chromium, make run's supervisor) wait on real time: under
# pytest-xdist (`make test` runs two processes on two cores) they all run in one group, one after another,
# beside the database-only tests, so no two of them race each other for the cores.
PROCESS_MARKERS = frozenset({"serve", "server", "worker", "browser", "slow_model", "upgrade"})


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if PROCESS_MARKERS.intersection(mark.name for mark in item.iter_markers()):
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus Lite server of the tests' own, served by threads of the test process; its URI."""
    from config.milvus_lite import serve_in_thread

    uri, stop = serve_in_thread(tmp_path_factory.mktemp("milvus"))
    try:
        yield uri
    finally:
        stop()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database, with this process's thread pools' connections to it closed before it is
    dropped: a search thread or an MCP tool thread keeps its connection open for its life, as a server's does."""
    yield
    from rag.mcp.server import close_tool_connections
    from rag.retrieval.concurrency import close_background_connections

    close_background_connections()
    close_tool_connections()


_started_postgres: list[str] = []


def pytest_sessionstart(session) -> None:
    """Note whether the embedded PostgreSQL of the tests is already running: if not, the run stops it at the end.

    Under pytest-xdist only the controlling process does this: it finishes after every worker has.
    """
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker
        return
    from django.conf import settings

    if getattr(settings, "EMBEDDED_DATABASE", False):
        from config.embedded_db.server import server_running

        data_dir = settings.DATABASES["default"]["OPTIONS"]["data_dir"]
        if not server_running(data_dir):
            _started_postgres.append(data_dir)


def pytest_sessionfinish(session, exitstatus) -> None:
    """Stop what this run started: the embedded PostgreSQL (the broker stops with its fixture)."""
    if _started_postgres:
        from config.embedded_db.server import stop_server

        stop_server(_started_postgres[0])


@dataclass
class Cast:
    """alice owns, bob reads, charlie is from another team."""

    alice: User
    bob: User
    charlie: User
    handbook: Collection  # team-readable
    private: Collection  # no team access; alice is a read-write member


@pytest.fixture
def cast(db: None) -> Cast:
    acme, other = TeamFactory(name="Acme"), TeamFactory(name="Other")
    alice = UserFactory.create(team=acme, username="alice", role=TeamRole.ADMIN)
    bob = UserFactory.create(team=acme, username="bob")
    charlie = UserFactory.create(team=other, username="charlie", role=TeamRole.ADMIN)
    handbook = CollectionFactory.create(team=acme, name="Handbook", default_access=Access.READ)
    CollectionMembershipFactory(collection=handbook, user=alice, role=Role.READ_WRITE)
    private = CollectionFactory.create(team=acme, name="Private", default_access=Access.NONE)
    CollectionMembershipFactory(collection=private, user=alice, role=Role.READ_WRITE)
    return Cast(alice=alice, bob=bob, charlie=charlie, handbook=handbook, private=private)


class Api:
    """A client that speaks the RPC API with a bearer token."""

    def __init__(self, token: str | None) -> None:
        self.client = APIClient()
        if token:
            self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(self, endpoint: str, body: Any = None, **kwargs: Any) -> _MonkeyPatchedResponse:
        return self.client.post(f"/api/{endpoint}", body if body is not None else {}, format="json", **kwargs)


class ApiFor(Protocol):
    """The `api_for` fixture: an Api holding a new token of `user` (no token for None)."""

    def __call__(self, user: User | None, scope: str = ...) -> Api: ...


@pytest.fixture
def api_for() -> ApiFor:
    def make(user: User | None, scope: str = TokenScope.WRITE) -> Api:
        return Api(api_token_create(user=user, scope=scope).plaintext if user else None)

    return make


@pytest.fixture(autouse=True)
def fake_providers(settings):
    """Every test runs on the deterministic fake embedding provider unless it says otherwise."""
    from django.core.cache import cache

    from rag.providers.embeddings import reset_provider_cache

    settings.RAG_EMBEDDING_PROVIDER = "fake"
    settings.RAG_EMBEDDING_MODEL = "fake-embedding"
    settings.RAG_EMBEDDING_DIMENSION = 384
    reset_provider_cache()
    cache.clear()
    yield
    reset_provider_cache()


SignIn = Callable[[User], Client]


@pytest.fixture
def signed_in(client: Client) -> SignIn:
    def sign_in(user: User) -> Client:
        user.save(update_fields=["password"])  # the factory sets the password without saving it
        client.force_login(user)
        return client

    return sign_in


def use_broker(url: str, *, eager: bool) -> None:
    """Point the Celery app at `url`, dropping pooled connections made for the previous broker."""
    from config.celery import app

    app.conf.update(broker_url=url, task_always_eager=eager)
    app._pool = None
    app.amqp._producer_pool = None


class TaskQueue:
    """Celery sending to queues in this process (kombu's memory transport) that no worker reads, or to no broker at all."""

    UNREACHABLE = "redis+socket:///nonexistent/cairn-test-broker.sock"

    def __init__(self) -> None:
        from config.broker import queue_names
        from config.celery import app

        self.app = app
        self.names = queue_names(app)  # interactive and bulk

    def up(self) -> None:
        use_broker("memory://", eager=False)

    def down(self) -> None:
        use_broker(self.UNREACHABLE, eager=False)

    def waiting(self, queue: str | None = None) -> list[tuple[str, list]]:
        """The tasks waiting in `queue` (or in every queue), each its name and arguments (the queues are left as they were)."""
        with self.app.connection_for_read() as connection:
            channel = connection.default_channel
            messages = []
            for name in [queue] if queue else self.names:
                while (message := channel.basic_get(name, no_ack=False)) is not None:
                    messages.append(message)
            tasks = [(m.headers["task"], m.decode()[0]) for m in messages]
            for message in messages:
                message.requeue()
            return tasks

    def run_waiting(self) -> int:
        """Run the waiting tasks here, as a worker would, until none is left (tasks they queue included); how many ran."""
        ran = 0
        with self.app.connection_for_read() as connection:
            channel = connection.default_channel
            while message := next((m for name in self.names if (m := channel.basic_get(name, no_ack=True)) is not None), None):
                args, kwargs, _ = message.decode()
                self.app.tasks[message.headers["task"]].apply(args=args, kwargs=kwargs)
                ran += 1
        return ran

    def purge(self) -> None:
        with self.app.connection_for_write() as connection:
            for name in self.names:
                connection.default_channel.queue_purge(name)


@pytest.fixture
def task_queue() -> Iterator[TaskQueue]:
    """Tasks are queued, not run: the queue starts empty and is up (`down()` takes the broker away)."""
    from config.celery import app

    previous = (app.conf.broker_url, app.conf.task_always_eager)
    queue = TaskQueue()
    queue.up()
    queue.purge()
    yield queue
    queue.up()
    queue.purge()
    use_broker(previous[0], eager=previous[1])
