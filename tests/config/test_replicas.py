"""Read replicas against a real streaming standby: the suite's embedded PostgreSQL 18 is the primary, and a hot
standby of it, made by pg_basebackup from the same binaries, is started here as `replica_1`."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection, connections
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from pytest_django import DjangoDbBlocker

from config.embedded_db.server import ServerAddress
from config.embedded_db.standby import Standby
from config.replicas import forget_health, replica_reads
from documents.models import Document
from permissions.models import Access, Role, TeamRole, TokenScope, User
from permissions.services import api_token_create
from rag.indexing.pipeline import index_documents
from rag.mcp.server import close_tool_connections
from rag.retrieval.concurrency import close_background_connections
from rag.retrieval.search import search
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.conftest import Api
from tests.factories import CollectionFactory, CollectionMembershipFactory, DocumentFactory, TeamFactory, UserFactory
from tests.rag.texts import OWLS, SECRET, VOLCANO

# Committed rows (the standby sees only those), flushed after each test; "__all__" lets the tests query the
# replica alias the module adds.
pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True, databases="__all__")]

REPLICA = "replica_1"
TOPICS = ["owls hunt mice", "bees visit apple blossoms", "volcanoes erupt lava", "orchards need rain", "barns hold hay"]


@dataclass
class World:
    standby: Standby
    alice: Api  # writes
    bob: Api  # reads
    bob_token: str
    bob_user: User
    owls: Document
    secret: Document


def _lsn(alias: str, sql: str) -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql)
        return str(cursor.fetchone()[0])


def caught_up(timeout: float = 20) -> None:
    """Wait until the replica has replayed everything the primary has written so far."""
    target = _lsn("default", "SELECT pg_current_wal_lsn()")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target])
            if cursor.fetchone()[0]:
                return
        time.sleep(0.05)
    raise AssertionError("the replica did not catch up")


def replay(paused: bool) -> None:
    with connections[REPLICA].cursor() as cursor:
        cursor.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


@pytest.fixture(scope="module")
def standby(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[Standby]:
    from django.conf import settings

    if not settings.EMBEDDED_DATABASE:
        pytest.skip("makes a standby of the embedded PostgreSQL")
    with django_db_blocker.unblock():
        connection.ensure_connection()
        db = connection.settings_dict
        primary = ServerAddress(host=db["HOST"], port=int(db["PORT"] or 5432), user=db["USER"])
        # Beside the primary's data under var/: pytest's own temporary folders are private to root, and the server
        # runs as another user there.
        standby = Standby(Path(db["OPTIONS"]["data_dir"]).with_name("test-postgres-standby")).create(primary).start()
        address = standby.address
        connections.settings[REPLICA] = connections.configure_settings(
            {
                "default": db,
                REPLICA: {
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": db["NAME"],
                    "HOST": address.host,
                    "PORT": str(address.port),
                    "USER": address.user,
                    "OPTIONS": {"connect_timeout": 2, "prepare_threshold": 0},
                    "TEST": {"MIRROR": "default"},
                },
            }
        )[REPLICA]
        routing = override_settings(
            DATABASE_REPLICAS=[REPLICA],
            DATABASE_REPLICA_CHECK_INTERVAL=0,
            DATABASE_REPLICA_MAX_LAG=60,
            DATABASE_REPLICA_PIN_SECONDS=60,
        )
        routing.enable()
        try:
            yield standby
        finally:
            routing.disable()
            forget_health()
            close_background_connections()
            close_tool_connections()
            connections[REPLICA].close()
            del connections.settings[REPLICA]
            standby.stop(mode="immediate")


@pytest.fixture
def world(standby: Standby) -> World:
    acme, other = TeamFactory(name="Acme"), TeamFactory(name="Other")
    alice = UserFactory.create(team=acme, username="alice", role=TeamRole.ADMIN)
    bob = UserFactory.create(team=acme, username="bob")
    UserFactory.create(team=other, username="charlie")
    handbook = CollectionFactory.create(team=acme, name="Handbook", default_access=Access.READ)
    CollectionMembershipFactory(collection=handbook, user=alice, role=Role.READ_WRITE)
    private = CollectionFactory.create(team=acme, name="Private", default_access=Access.NONE)
    CollectionMembershipFactory(collection=private, user=alice, role=Role.READ_WRITE)
    owls = DocumentFactory.create(collection=handbook, created_by=alice, title="Owls", text=OWLS)
    secret = DocumentFactory.create(collection=private, created_by=alice, title="Secret", text=SECRET)
    volcano = DocumentFactory.create(collection=handbook, created_by=alice, title="Volcanoes", text=VOLCANO)
    index_documents(document_ids=[owls.pk, secret.pk, volcano.pk])
    alice_api = Api(api_token_create(user=alice, scope=TokenScope.WRITE).plaintext)
    bob_token = api_token_create(user=bob).plaintext
    cache.clear()
    caught_up()
    # As stored: the factory sets a password on the object only, and a session checks the stored one.
    bob = User.objects.get(pk=bob.pk)
    return World(
        standby=standby, alice=alice_api, bob=Api(bob_token), bob_token=bob_token, bob_user=bob, owls=owls, secret=secret
    )


def on_replica(call: Callable[[], Any]) -> tuple[Any, int]:
    """`call()`'s result and how many queries this thread sent the replica while making it."""
    with CaptureQueriesContext(connections[REPLICA]) as queries:
        result = call()
    return result, len(queries.captured_queries)


def on_primary_only(call: Callable[[], Any]) -> Any:
    with override_settings(DATABASE_REPLICAS=[]):
        return call()


def _search(world: World) -> Any:
    response = world.bob.post("rag.search", {"query": "owls hunt mice", "mode": "hybrid", "threshold": 0})
    assert response.status_code == 200, response.content
    return [(hit["id"], hit["document"]["title"], round(hit["score"], 6)) for hit in response.json()["data"]]


def _answer(world: World) -> Any:
    response = world.bob.post("rag.answer", {"query": "What do owls hunt?"})
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    return data["answer"], [(c["document"]["id"], c["quote"]) for c in data["citations"]]


def _streamed_answer(world: World) -> Any:
    response = world.bob.post("rag.answer", {"query": "What do owls hunt?", "stream": True})
    assert isinstance(response, StreamingHttpResponse), response
    # Consumed here, after the middleware has returned, as a WSGI server sends it.
    events = sse_events(b"".join(response.streaming_content).decode())
    assert "error" not in events, events
    return events["done"]["answer"], [(c["document"]["id"], c["quote"]) for c in events["done"]["citations"]]


def sse_events(raw: str) -> dict[str, Any]:
    events = {}
    for block in raw.strip().split("\n\n"):
        name, data = re.search(r"^event: (.*)$", block, re.M), re.search(r"^data: (.*)$", block, re.M)
        assert name and data, block
        events[name.group(1)] = json.loads(data.group(1))
    return events


def mcp_tool(token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tools/call on /mcp with `token`: the tool's structured result (an error result fails the test)."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    response = Client().post("/mcp", json.dumps(message), content_type="application/json", headers=headers)
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


def _graph(world: World) -> Any:
    response = world.bob.post("graph.entities", {"query": "", "limit": 100})
    assert response.status_code == 200, response.content
    return sorted(entity["name"] for entity in response.json()["data"])


def _info(world: World) -> Any:
    response = world.bob.post("documents.info", {"id": str(world.owls.pk)})
    assert response.status_code == 200, response.content
    return response.json()["data"]["title"], response.json()["data"]["text"]


def _page(world: World) -> Any:
    client = Client()
    client.force_login(world.bob_user)
    response = client.get(f"/doc/{world.owls.pk}")
    assert response.status_code == 200
    return "Owls hunt mice" in response.content.decode()


def test_search_answer_graph_and_page_reads_go_to_the_replica_and_equal_the_primarys(world: World) -> None:
    for read in (_search, _answer, _streamed_answer, _graph, _info, _page):
        from_replica, replica_queries = on_replica(partial(read, world))
        assert replica_queries > 0, f"{read.__name__} did not reach the replica"
        assert from_replica, f"{read.__name__}: nothing to compare"
        assert from_replica == on_primary_only(partial(read, world)), read.__name__


def test_a_streamed_answers_retrieval_reads_the_replica(world: World) -> None:
    replay(paused=True)
    try:
        # A passage only the primary has: a retrieval that read the primary would cite it.
        pellets = DocumentFactory.create(
            collection=world.owls.collection, created_by=world.owls.created_by, title="Owl pellets", text=PELLETS
        )
        index_documents(document_ids=[pellets.pk])
        assert str(pellets.pk) not in _cited(world)
    finally:
        replay(paused=False)
    caught_up()
    assert str(pellets.pk) in _cited(world)


PELLETS = "Owls hunt mice at night and swallow them whole. What do owls hunt? Mice, voles and shrews."


def _cited(world: World) -> set[str]:
    response = world.bob.post("rag.answer", {"query": "What do owls hunt?", "stream": True, "fresh": True})
    assert isinstance(response, StreamingHttpResponse), response
    # Read here, after the view has returned, as a WSGI server sends it.
    events = sse_events(b"".join(response.streaming_content).decode())
    assert "done" in events, events
    return {citation["document"]["id"] for citation in events["done"]["citations"]}


def test_a_writer_reads_its_own_write_while_the_replica_lags_and_writes_land_on_the_primary(world: World) -> None:
    replay(paused=True)
    try:
        response = world.alice.post("documents.update", {"id": str(world.owls.pk), "title": "Owls, revised"})
        assert response.status_code == 200, response.content
        assert Document.objects.using("default").get(pk=world.owls.pk).title == "Owls, revised"
        assert world.alice.post("documents.info", {"id": str(world.owls.pk)}).json()["data"]["title"] == "Owls, revised"
        # bob has not written: he reads the replica, which has not replayed alice's write yet.
        assert world.bob.post("documents.info", {"id": str(world.owls.pk)}).json()["data"]["title"] == "Owls"
        with override_settings(DATABASE_REPLICA_MAX_LAG=0.2):
            time.sleep(0.3)
            title = world.bob.post("documents.info", {"id": str(world.owls.pk)}).json()["data"]["title"]
        assert title == "Owls, revised", "a replica lagging past DATABASE_REPLICA_MAX_LAG was read"
    finally:
        replay(paused=False)
    caught_up()
    assert world.bob.post("documents.info", {"id": str(world.owls.pk)}).json()["data"]["title"] == "Owls, revised"


def test_mcp_tools_read_the_replica_and_a_writer_reads_its_own_write_there_too(world: World) -> None:
    alice_token = api_token_create(user=User.objects.get(username="alice"), scope=TokenScope.WRITE).plaintext
    owls = {"id": str(world.owls.pk)}
    assert mcp_tool(world.bob_token, "read_document", owls)["data"]["title"] == "Owls"
    found = mcp_tool(world.bob_token, "search", {"query": "owls hunt mice", "mode": "hybrid", "threshold": 0})
    assert "Owls" in {hit["document"]["title"] for hit in found["data"]}
    replay(paused=True)
    try:
        response = Api(alice_token).post("documents.update", {"id": str(world.owls.pk), "title": "Owls, revised"})
        assert response.status_code == 200, response.content
        # bob's tools read the replica, which has not replayed the write; alice wrote, so hers read the primary.
        assert mcp_tool(world.bob_token, "read_document", owls)["data"]["title"] == "Owls"
        assert mcp_tool(alice_token, "read_document", owls)["data"]["title"] == "Owls, revised"
    finally:
        replay(paused=False)
    caught_up()
    assert mcp_tool(world.bob_token, "read_document", owls)["data"]["title"] == "Owls, revised"


def test_the_randomized_access_oracle_holds_through_the_replica(world: World) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(
        21, teams=2, users=8, documents=60
    )
    rng = random.Random(21)
    for d in docs:
        d.text = ". ".join(rng.sample(TOPICS, 3)) + "."
    Document.objects.bulk_update(docs, ["text"])
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    caught_up()
    cache.clear()
    shown = 0
    for user in users:
        allowed = {
            d.pk for d in docs if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, False)
        }
        for mode in ("vector", "keyword", "hybrid"):
            with replica_reads():
                result, replica_queries = on_replica(
                    partial(search, user=user, query="owls and bees in apple orchards", limit=20, threshold=0.0, mode=mode)
                )
            assert replica_queries > 0, "the search did not reach the replica"
            found = {hit.document_id for hit in result.hits}
            assert found <= allowed, f"the replica shows {user.username} a document the oracle keeps from them ({mode})"
            assert set(result.documents) <= allowed
            shown += len(found)
    assert shown > 0, "the oracle compared nothing"


REQUESTS = 24


def test_stopping_the_replica_mid_load_loses_no_request(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """The replica stops between two health checks: requests that find it gone are answered from the primary."""
    statuses: list[int] = []
    stop_now = threading.Event()

    def load() -> None:
        api = Api(world.bob_token)
        for i in range(REQUESTS):
            kind = i % 4
            if kind == 0:
                response = api.post("documents.info", {"id": str(world.owls.pk)})
                statuses.append(response.status_code)
            elif kind == 1:
                response = api.post("rag.search", {"query": "owls hunt mice", "mode": "hybrid", "threshold": 0})
                statuses.append(response.status_code)
            elif kind == 2:
                # A streamed answer: a failure after the 200 would be an error event.
                statuses.append(200 if _streamed_answer(world)[1] else 0)
            else:
                # An MCP tool: a failure would be an error result inside a 200.
                found = mcp_tool(world.bob_token, "search", {"query": "owls hunt mice", "threshold": 0})
                statuses.append(200 if found["data"] else 0)
            if i == 5:
                stop_now.set()
        connections.close_all()

    with override_settings(DATABASE_REPLICA_CHECK_INTERVAL=3600), caplog.at_level("WARNING", logger="config.replicas"):
        thread = threading.Thread(target=load)
        thread.start()
        assert stop_now.wait(60)
        world.standby.stop(mode="fast")
        thread.join(120)
    try:
        assert len(statuses) == REQUESTS, "requests were lost"
        assert set(statuses) == {200}, statuses
        assert any("answering from the primary" in r.getMessage() for r in caplog.records), "no request met the stopped replica"
    finally:
        world.standby.start()
        forget_health()


def test_an_mcp_tool_whose_replica_stops_is_answered_from_the_primary(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """The tool meets the stopped replica itself (its health still cached as good) and is run again on the primary."""
    search = {"query": "owls hunt mice", "mode": "hybrid", "threshold": 0}
    with override_settings(DATABASE_REPLICA_CHECK_INTERVAL=3600), caplog.at_level("WARNING", logger="config.replicas"):
        assert mcp_tool(world.bob_token, "search", search)["data"]
        world.standby.stop(mode="fast")
        try:
            found = mcp_tool(world.bob_token, "search", search)
            assert "Owls" in {hit["document"]["title"] for hit in found["data"]}
            assert any("answering from the primary" in r.getMessage() for r in caplog.records), "the tool never met the replica"
        finally:
            world.standby.start()
            forget_health()
