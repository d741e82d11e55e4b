"""The Milvus vector backend against a real Milvus Lite server: the access oracle, pgvector's pages, the outbox,
reconciliation, and every change that must reach Milvus (or that the check against PostgreSQL covers)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from documents.models import Document
from documents.services import (
    collection_membership_remove,
    collection_membership_set,
    document_archive,
    document_delete,
    document_move,
)
from rag.corpus import milvus
from rag.indexing.pipeline import index_documents
from rag.indexing.reconcile import milvus_drift, milvus_repair
from rag.indexing.vector_outbox import outbox_backlog, outbox_drain
from rag.models import Chunk
from rag.retrieval import vector, visibility
from rag.retrieval.query import embed_query
from rag.retrieval.search import search
from rag.retrieval.stats import scope_index_stats
from rag.retrieval.visibility import search_scope
from rag.tasks import reconcile_index_task
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.conftest import Cast
from tests.factories import DocumentFactory

TOPICS = [
    "owls hunt mice at night",
    "volcanoes erupt molten lava",
    "sourdough bread needs starter",
    "glaciers carve deep valleys",
    "bees pollinate apple orchards",
    "comets have icy tails",
]
QUERY = "owls and bees in apple orchards"


@pytest.fixture
def milvus_backend(settings, milvus_server: str, db: None) -> Iterator[None]:
    """The milvus backend on the session's Milvus Lite, in collections of this test's own; every scope ranked there."""
    settings.RAG_VECTOR_BACKEND = "milvus"
    settings.RAG_MILVUS_URI = milvus_server
    settings.RAG_MILVUS_COLLECTION_PREFIX = f"test_{uuid.uuid4().hex[:10]}"
    settings.RAG_EXACT_SEARCH_MAX_CHUNKS = 0
    milvus.set_outbox_triggers(enabled=True)  # in the test's transaction: rolled back with it
    yield
    settings.RAG_MILVUS_URI = milvus_server  # a test may have pointed it elsewhere
    for name in milvus.our_collections():
        milvus.drop_collection(name)


def _stored(chunk_ids: list[int]) -> dict[int, dict]:
    """What Milvus holds for these chunks (no vector)."""
    name = milvus.collection_name("fake-embedding", 384)
    rows = milvus.client().query(name, ids=chunk_ids, output_fields=["chunk_id", *milvus.SCALARS])
    return {int(row["chunk_id"]): row for row in rows}


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count the calls of module.name (still made)."""
    calls: list[int] = []
    original: Callable = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _ranking(user, query_vector: list[float], *, path: str | None, limit: int = 10) -> list[vector.Hit]:
    scope = search_scope(user=user)
    return vector.vector_ranking(
        scope=scope,
        vector=query_vector,
        model_id="fake-embedding",
        dimension=384,
        limit=limit,
        threshold=-1.0,
        scope_chunks=scope_index_stats(scope, model_id="fake-embedding").chunks,
        path=path,  # type: ignore[arg-type]
    )


def test_the_random_matrix_through_milvus_never_leaks_and_its_pages_are_pgvector_s(
    milvus_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(7, documents=90)
    rng = random.Random(7)
    for d in docs:
        d.text = ". ".join(rng.sample(TOPICS, 3)) + "."
    Document.objects.bulk_update(docs, ["text"])
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    assert outbox_drain() > 0
    query_vector = embed_query(QUERY)
    readers = users[:10]
    allowed = {
        user.pk: {
            d.pk for d in docs if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, False)
        }
        for user in readers
    }
    exact = {user.pk: _ranking(user, query_vector, path="exact") for user in readers}
    assert sum(bool(page) for page in exact.values()) >= 5, "most users must read something, or the test proves little"
    asked = _counting(monkeypatch, milvus, "search")
    scans = _counting(monkeypatch, vector, "_scan")
    # The scope as its documents; as readable collections (and shared documents) less the hidden ones; and as
    # collections alone, few candidates a round: the check drops the hidden ones and Milvus is asked again.
    for shape in ("documents", "collections", "refill"):
        if shape != "documents":
            monkeypatch.setattr(visibility, "MILVUS_DOCUMENT_LIST_MAX", 0)
        if shape == "refill":
            monkeypatch.setattr(visibility, "MILVUS_EXCLUDE_MAX", 0)
            monkeypatch.setattr(vector, "MILVUS_MIN_CANDIDATES", 1)
            monkeypatch.setattr(vector, "MILVUS_OVERFETCH", 1)
        asked.clear()
        found = expected = 0
        for user in readers:
            # The whole search too, where Milvus returns the most the viewer may not read.
            for mode in ("vector", "hybrid") if shape == "refill" else ():
                result = search(user=user, query=QUERY, limit=10, threshold=0.0, mode=mode)
                assert {h.document_id for h in result.hits} <= allowed[user.pk], f"leak for {user.username} in {mode} ({shape})"
                assert set(result.documents) <= allowed[user.pk]
            scans.clear()
            got = _ranking(user, query_vector, path=None)
            assert not scans, f"Milvus left {user.username}'s page short ({shape}): the exact scan finished it"
            assert {h.document_id for h in got} <= allowed[user.pk]
            assert len(got) == len(exact[user.pk]), f"short page for {user.username} ({shape})"
            # Texts repeat, so scores tie: a hit counts when it scores at least the exact page's last.
            kth = exact[user.pk][-1].score if exact[user.pk] else 0.0
            found += sum(h.score >= kth - 1e-5 for h in got)
            expected += len(exact[user.pk])
        assert found / expected >= 0.95, f"recall@10 against exact {found / expected:.3f} ({shape})"
    assert len(asked) > 3 * len(readers), "no page needed Milvus to be asked again"


def test_a_search_sends_the_scope_to_milvus_as_a_filter_expression(cast: Cast, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = search_scope(user=cast.bob)
    doc = DocumentFactory.create(collection=cast.handbook, text="Owls hunt mice at night.")
    assert visibility.milvus_expression(scope) == f'team == "{cast.bob.team_id}" and document in ["{doc.pk}"]'
    monkeypatch.setattr(visibility, "MILVUS_DOCUMENT_LIST_MAX", 0)
    hidden = DocumentFactory.create(collection=cast.handbook, text="A draft.", published_at=None)
    assert visibility.milvus_expression(scope) == (
        f'team == "{cast.bob.team_id}" and (collection in ["{cast.handbook.pk}"]) and not (document in ["{hidden.pk}"])'
    )
    assert visibility.milvus_expression(search_scope(user=cast.charlie)) is None


def test_the_outbox_and_reconciliation_repair_a_broken_milvus(cast: Cast, milvus_backend: None) -> None:
    docs = [DocumentFactory.create(collection=cast.handbook, text=f"{topic}. {topic}.") for topic in TOPICS]
    index_documents(document_ids=[d.pk for d in docs])
    assert outbox_backlog() > 0, "the chunks' transaction wrote the outbox"
    outbox_drain()
    assert outbox_backlog() == 0
    chunk_ids = sorted(Chunk.objects.values_list("pk", flat=True))
    assert set(_stored(chunk_ids)) == set(chunk_ids)
    assert milvus_drift().counts() == {"missing": 0, "stale": 0, "orphaned": 0, "collections": 0}
    # Break Milvus behind the outbox's back: two vectors lost, one orphan, one row with a wrong collection.
    name = milvus.collection_name("fake-embedding", 384)
    milvus.client().delete(name, ids=chunk_ids[:2])
    orphan = milvus.VectorRow(
        chunk_ids[-1] + 10_000, str(cast.alice.team_id), str(cast.handbook.pk), str(docs[0].pk), 1, "fake-embedding", [0.1] * 384
    )
    wrong = milvus.VectorRow(
        chunk_ids[2], str(cast.alice.team_id), str(cast.private.pk), str(docs[2].pk), 1, "fake-embedding", [0.1] * 384
    )
    milvus.upsert(model_id="fake-embedding", dimension=384, rows=[orphan, wrong])
    unused = milvus.ensure_collection("retired-model", 8)
    drift = milvus_drift()
    assert (sorted(drift.missing), drift.stale, drift.orphaned, drift.collections) == (
        chunk_ids[:2],
        [chunk_ids[2]],
        [orphan.chunk_id],
        [unused],
    )
    assert milvus_repair(drift) == 4
    outbox_drain()
    assert milvus_drift().counts() == {"missing": 0, "stale": 0, "orphaned": 0, "collections": 0}
    assert _stored([chunk_ids[2]])[chunk_ids[2]]["collection"] == str(cast.handbook.pk)
    # The periodic reconciliation does the same, and so does the command.
    milvus.client().delete(name, ids=chunk_ids[:1])
    assert reconcile_index_task()["milvus_missing"] == 1
    assert milvus_drift().counts()["missing"] == 0
    milvus.client().delete(name, ids=chunk_ids[:1])
    out = StringIO()
    call_command("reconcile_index", "--fix", stdout=out)
    assert "Milvus: 1 vector(s) missing, 0 stale, 0 orphaned" in out.getvalue()
    assert milvus_drift().counts()["missing"] == 0


def test_moves_deletes_and_permission_changes_reach_what_milvus_returns(
    cast: Cast, milvus_backend: None, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setattr(visibility, "MILVUS_DOCUMENT_LIST_MAX", 0)  # the scope by collections: the stored field matters
    secret = DocumentFactory.create(
        collection=cast.private, created_by=cast.alice, title="Secret", text="Owls hunt mice in the barn."
    )
    public = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Public", text="Volcanoes erupt molten lava."
    )
    index_documents(document_ids=[secret.pk, public.pk])
    outbox_drain()
    owls = embed_query("owls hunt mice")
    scans = _counting(monkeypatch, vector, "_scan")

    def bob_finds() -> set[uuid.UUID | None]:
        return {h.document_id for h in _ranking(cast.bob, owls, path=None)}

    assert bob_finds() == {public.pk}
    # A permission change needs nothing from Milvus: the expression and the check come from PostgreSQL.
    collection_membership_set(collection=cast.private, user=cast.bob)
    assert bob_finds() == {public.pk, secret.pk}
    collection_membership_remove(collection=cast.private, user=cast.bob)
    assert bob_finds() == {public.pk}
    # A move rewrites the chunks' collection in Milvus through the outbox.
    secret_chunks = list(Chunk.objects.filter(document=secret).values_list("pk", flat=True))
    document_move(document=secret, collection=cast.handbook)
    assert outbox_backlog() == len(secret_chunks)
    outbox_drain()
    assert {row["collection"] for row in _stored(secret_chunks).values()} == {str(cast.handbook.pk)}
    scans.clear()
    assert bob_finds() == {public.pk, secret.pk}
    assert not scans, "Milvus found the moved document itself"
    # Archived: hidden at once, by the check, while Milvus still holds its vectors.
    document_archive(document=secret)
    assert bob_finds() == {public.pk}
    assert set(_stored(secret_chunks)) == set(secret_chunks)
    # Deleted: its chunks go, and the outbox takes their vectors out of Milvus.
    with django_capture_on_commit_callbacks(execute=True):
        document_delete(document=public)
    assert bob_finds() == set()
    public_chunks = [row for row in outbox_rows() if row not in secret_chunks]
    assert public_chunks, "deleting the chunks wrote the outbox"
    outbox_drain()
    assert _stored(public_chunks) == {}


def outbox_rows() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT chunk_id FROM rag_vector_outbox ORDER BY id")
        return [pk for (pk,) in cursor.fetchall()]


def test_a_model_switch_reaches_milvus_through_the_outbox_and_reconciliation(cast: Cast, milvus_backend: None, settings) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, text="Owls hunt mice at night.")
    index_documents(document_ids=[doc.pk])
    outbox_drain()
    old = milvus.collection_name("fake-embedding", 384)
    settings.RAG_EMBEDDING_MODEL = "fake-embedding-2"
    settings.RAG_EMBEDDING_DIMENSION = 64
    from rag.indexing.cleanup import cleanup_embeddings
    from rag.providers.embeddings import reset_provider_cache

    reset_provider_cache()
    with connection.cursor() as cursor:
        # The test's one transaction still holds the first chunks' deferred foreign-key checks, which would stop the
        # new model's CREATE INDEX (each indexing pass commits on its own outside the tests).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    index_documents(document_ids=[doc.pk])
    cleanup_embeddings()
    outbox_drain()
    new = milvus.collection_name("fake-embedding-2", 64)
    assert milvus.client().query(old, filter="", output_fields=["count(*)"])[0]["count(*)"] == 0
    new_chunks = list(Chunk.objects.filter(model_id="fake-embedding-2").values_list("pk", flat=True))
    assert {int(r["chunk_id"]) for r in milvus.client().query(new, ids=new_chunks, output_fields=["chunk_id"])} == set(new_chunks)
    drift = milvus_drift()
    assert drift.collections == [old]
    milvus_repair(drift)
    assert old not in milvus.our_collections()


def test_a_search_that_milvus_does_not_answer_is_ranked_in_postgresql(
    cast: Cast, milvus_backend: None, settings, caplog: pytest.LogCaptureFixture
) -> None:
    docs = [DocumentFactory.create(collection=cast.handbook, text=f"{topic}.") for topic in TOPICS]
    index_documents(document_ids=[d.pk for d in docs])
    owls = embed_query("owls hunt mice")
    exact = [h.chunk_id for h in _ranking(cast.bob, owls, path="exact", limit=3)]
    from config.milvus_lite import free_port

    settings.RAG_MILVUS_URI = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.RAG_MILVUS_TIMEOUT = 0.5
    with caplog.at_level("WARNING", logger="rag.search"):
        assert [h.chunk_id for h in _ranking(cast.bob, owls, path=None, limit=3)] == exact
    assert "Milvus did not answer" in caplog.text


def test_with_the_pgvector_backend_the_outbox_triggers_are_off(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, text="Owls hunt mice at night.")
    index_documents(document_ids=[doc.pk])
    assert outbox_backlog() == 0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_VECTOR_BACKEND", "faiss", "RAG_VECTOR_BACKEND must be pgvector or milvus, got 'faiss'"),
    ],
)
def test_a_bad_milvus_setting_fails_at_start_up(name: str, value: str, message: str) -> None:
    from tests.test_project import run_settings

    result = run_settings("config.settings.local", DATABASE_URL="postgres://x@127.0.0.1:1/x", **{name: value})
    assert result.returncode != 0 and message in result.stderr
