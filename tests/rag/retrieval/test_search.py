"""rag.search, rag.status and rag.embed through the API, with the cast and a random permission matrix."""

from __future__ import annotations

import random

import numpy as np
import pytest
from django.core.cache import cache

from documents.models import Document
from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from rag.retrieval import vector as vector_paths
from rag.retrieval.concurrency import close_background_connections
from rag.retrieval.query import embed_query
from rag.retrieval.search import search
from rag.retrieval.stats import scope_index_stats
from rag.retrieval.vector import vector_ranking
from rag.retrieval.visibility import search_scope
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.factories import (
    CollectionFactory,
    DocumentFactory,
    DocumentMembershipFactory,
)

MODES = ["vector", "keyword", "hybrid"]
TOPICS = [
    "owls hunt mice at night",
    "volcanoes erupt molten lava",
    "sourdough bread needs starter",
    "glaciers carve deep valleys",
    "bees pollinate apple orchards",
    "comets have icy tails",
]


@pytest.fixture
def corpus(cast):
    docs = {
        "handbook": DocumentFactory(
            collection=cast.handbook, created_by=cast.alice, title="Owls", text="# Owls\n\nOwls hunt mice at night in the forest."
        ),
        "private": DocumentFactory(
            collection=cast.private,
            created_by=cast.alice,
            title="Secret owls",
            text="# Secret\n\nOwls secretly hunt mice in the private barn.",
        ),
        "draft": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Draft owls",
            text="Owls hunt mice, a draft.",
            published_at=None,
        ),
        "other_team": DocumentFactory(
            collection=CollectionFactory(team=cast.charlie.team),
            created_by=cast.charlie,
            title="Their owls",
            text="Owls hunt mice in another team.",
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def titles(response) -> set[str]:
    return {item["document"]["title"] for item in response.json()["data"]}


@pytest.mark.parametrize("mode", MODES)
def test_each_user_finds_only_what_they_may_read(cast, api_for, corpus, mode):
    body = {"query": "owls hunt mice", "mode": mode, "threshold": 0}
    assert titles(api_for(cast.alice).post("rag.search", body)) == {"Owls", "Secret owls", "Draft owls"}
    assert titles(api_for(cast.bob).post("rag.search", body)) == {"Owls"}
    assert titles(api_for(cast.charlie).post("rag.search", body)) == {"Their owls"}


@pytest.mark.parametrize("mode", MODES)
def test_a_result_has_the_documented_shape(cast, api_for, corpus, mode):
    response = api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": mode, "threshold": 0})
    assert response.status_code == 200
    body = response.json()
    item = body["data"][0]
    assert set(item) == {"id", "document", "score", "context", "chunkIndex"}
    assert set(item["document"]) == {"id", "title", "url", "collectionId", "updatedAt"}
    assert "Owls hunt mice" in item["context"]
    assert body["pagination"] == {"limit": 10, "count": len(body["data"])} and body["degraded"] is False
    without = api_for(cast.bob).post(
        "rag.search", {"query": "owls hunt mice", "mode": mode, "includeContext": False, "threshold": 0}
    )
    assert without.json()["data"][0]["context"] is None


@pytest.mark.parametrize("mode", MODES)
def test_an_invisible_collection_or_document_is_404(cast, api_for, corpus, mode):
    bob = api_for(cast.bob)
    for body in (
        {"collectionId": str(cast.private.id)},
        {"documentId": str(corpus["private"].id)},
        {"documentId": str(corpus["other_team"].id)},
    ):
        response = bob.post("rag.search", {"query": "owls hunt mice", "mode": mode, **body})
        assert response.status_code == 404 and response.json()["error"] == "not_found"


def test_collection_and_document_filters_narrow_the_results(cast, api_for, corpus):
    alice = api_for(cast.alice)
    in_private = alice.post("rag.search", {"query": "owls hunt mice", "collectionId": str(cast.private.id), "threshold": 0})
    assert titles(in_private) == {"Secret owls"}
    one = alice.post("rag.search", {"query": "owls hunt mice", "documentId": str(corpus["handbook"].id), "threshold": 0})
    assert titles(one) == {"Owls"}


def test_archived_and_deleted_documents_leave_the_results(cast, api_for, corpus, django_capture_on_commit_callbacks):
    alice = api_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        alice.post("documents.archive", {"id": str(corpus["handbook"].id)})
        alice.post("documents.delete", {"id": str(corpus["private"].id)})
    assert titles(alice.post("rag.search", {"query": "owls hunt mice", "threshold": 0})) == {"Draft owls"}


def test_a_shared_document_becomes_searchable_without_reindexing(cast, api_for, corpus):
    DocumentMembershipFactory(document=corpus["private"], user=cast.bob)
    assert "Secret owls" in titles(api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "threshold": 0}))


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "ab"},
        {"query": "  a  "},
        {"query": 12345},
        {"query": ["owls"]},
        {"query": None},
        {"query": "x" * 100_000},
        {"query": "owls", "limit": 0},
        {"query": "owls", "limit": 51},
        {"query": "owls", "limit": 10**12},
        {"query": "owls", "limit": "ten"},
        {"query": "owls", "limit": 2.5},
        {"query": "owls", "limit": True},
        {"query": "owls", "threshold": 1.5},
        {"query": "owls", "threshold": -0.1},
        {"query": "owls", "threshold": "high"},
        {"query": "owls", "mode": "semantic"},
        {"query": "owls", "mode": ["vector"]},
        {"query": "owls", "collectionId": "not-a-uuid"},
        {"query": "owls", "documentId": "1; DROP TABLE documents_document"},
        {"query": "owls", "weights": [1]},
        {"query": "owls", "weights": [1, "a"]},
        {"query": "owls", "includeContext": "maybe"},
        {"query": "owls\x00mice"},
    ],
)
def test_bad_input_gets_400_invalid_query(cast, api_for, corpus, body):
    response = api_for(cast.alice).post("rag.search", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_query" and response.json()["message"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "query",
    [
        "owls & | ! ( ) : * mice",
        "'; DROP TABLE document_embeddings; --",
        'owl\'s \\ "mice"',
        "<-> <2> !!!",
        "the and of",
        "::vector",
    ],
)
def test_sql_and_tsquery_metacharacters_are_just_text(cast, api_for, corpus, mode, query):
    response = api_for(cast.alice).post("rag.search", {"query": query, "mode": mode})
    assert response.status_code == 200, response.content
    assert Chunk.objects.exists()


def test_no_embeddings_yet_is_404_no_embeddings(cast, api_for):
    DocumentFactory(collection=cast.handbook)  # never indexed
    response = api_for(cast.bob).post("rag.search", {"query": "anything at all"})
    assert response.status_code == 404 and response.json()["error"] == "no_embeddings"


def test_rag_disabled_is_400(cast, api_for, settings):
    settings.RAG_ENABLED = False
    response = api_for(cast.bob).post("rag.search", {"query": "owls hunt mice"})
    assert response.status_code == 400 and response.json()["error"] == "rag_disabled"


def test_an_unreachable_embedding_provider_is_503(cast, api_for, corpus, settings, respx_mock):
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_LITELLM_BASE_URL = "http://llm.test"
    settings.RAG_EMBEDDING_MAX_RETRIES = 0
    from rag.providers.embeddings import reset_provider_cache

    reset_provider_cache()
    respx_mock.post("http://llm.test/embeddings").respond(503)
    response = api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": "vector"})
    assert response.status_code == 503 and response.json()["error"] == "embedding_unavailable"
    keyword = api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": "keyword"})
    assert keyword.status_code == 200, "keyword search needs no embedding"
    hybrid = api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": "hybrid"})
    assert hybrid.status_code == 200 and hybrid.json()["degraded"] is True, "hybrid falls back to keyword, flagged"
    assert [h["id"] for h in hybrid.json()["data"]] == [h["id"] for h in keyword.json()["data"]]
    assert keyword.json()["degraded"] is False


def test_too_many_requests_get_429_with_retry_after(cast, api_for, corpus, monkeypatch):
    from rest_framework.throttling import ScopedRateThrottle

    # The class reads its rates once, at import: patch them for this test only.
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"user": "1000/min", "anon": "10/min", "rag": "2/min"})
    bob = api_for(cast.bob)
    statuses = [bob.post("rag.search", {"query": "owls hunt mice"}) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 429]
    assert statuses[-1].json()["error"] == "rate_limited" and int(statuses[-1]["Retry-After"]) > 0


def test_the_query_embedding_is_cached(cast, api_for, corpus):
    from rag.providers.embeddings import get_embedding_provider

    provider = get_embedding_provider()
    bob = api_for(cast.bob)
    bob.post("rag.search", {"query": "Owls hunt   mice", "mode": "vector"})
    calls = len(provider.calls)
    bob.post("rag.search", {"query": "owls hunt mice", "mode": "vector"})
    assert len(provider.calls) == calls


def test_rag_status_counts_the_callers_visible_documents(cast, api_for, corpus):
    DocumentFactory(collection=cast.handbook)  # not indexed yet
    data = api_for(cast.bob).post("rag.status").json()["data"]
    assert data == {
        "model": "fake-embedding",
        "documents": 2,
        "indexed": 1,
        "pending": 1,
        "failed": 0,
        "chunks": 1,
        "backfill": None,
    }


def test_rag_embed_queues_a_visible_document_and_needs_write_scope(cast, api_for, corpus):
    doc = corpus["handbook"]
    assert api_for(cast.alice, "read").post("rag.embed", {"documentId": str(doc.id)}).status_code == 403
    assert api_for(cast.bob).post("rag.embed", {"documentId": str(corpus["private"].id)}).status_code == 404
    response = api_for(cast.alice).post("rag.embed", {"documentId": str(doc.id)})
    assert response.json()["data"] == {"documentId": str(doc.id), "queued": True}


def _exact_top(user, vector, model_id, limit):
    """Exact cosine ranking over the user's visible chunks, in Python."""
    visible = set(Document.objects.visible_to(user).values_list("id", flat=True))
    rows = [(r.id, np.asarray(r.embedding)) for r in Chunk.objects.filter(model_id=model_id, document_id__in=visible)]
    q = np.asarray(vector)
    scores = sorted((float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v))) for _, v in rows), reverse=True)
    return scores[:limit], len(rows)


@pytest.mark.parametrize("force_index", [False, True], ids=["exact", "hnsw"])
def test_random_matrix_never_leaks_and_pages_are_full(db, force_index, monkeypatch):
    if force_index:
        monkeypatch.setattr(vector_paths, "choose_path", lambda **kwargs: "hnsw")
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(7, documents=240)
    rng = random.Random(7)
    for d in docs:
        d.text = ". ".join(rng.sample(TOPICS, 3)) + "."
    Document.objects.bulk_update(docs, ["text"])
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    cache.clear()
    for user in users[:18]:
        allowed = {
            d.pk for d in docs if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, False)
        }
        for mode in MODES:
            result = search(user=user, query="owls and bees in apple orchards", limit=20, threshold=0.0, mode=mode)
            found = {h.document_id for h in result.hits}
            assert found <= allowed, f"leak for {user.username} in {mode}"
            assert set(result.documents) <= allowed
        vector = embed_query("owls and bees in apple orchards")
        exact, visible_chunks = _exact_top(user, vector, "fake-embedding", 20)
        scope = search_scope(user=user)
        scope_chunks = scope_index_stats(scope, model_id="fake-embedding").chunks
        got = vector_ranking(
            scope=scope,
            vector=vector,
            model_id="fake-embedding",
            dimension=384,
            limit=20,
            threshold=-1.0,
            scope_chunks=scope_chunks,
            path="hnsw" if force_index else "exact",
        )
        assert len(got) == min(20, visible_chunks), "short page"
        # Texts repeat, so compare scores (ties make ids ambiguous): a hit counts if it scores
        # at least the exact k-th best.
        kth = exact[-1] if exact else 0.0
        recall = sum(h.score >= kth - 1e-5 for h in got) / max(len(exact), 1)
        assert recall >= (0.9 if force_index else 1.0)


def test_each_search_is_logged_with_its_latency_split_but_not_its_text(cast, api_for, corpus, settings, caplog):
    with caplog.at_level("INFO", logger="rag.search"):
        api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": "hybrid", "threshold": 0})
    (record,) = [r for r in caplog.records if r.name == "rag.search"]
    message = record.getMessage()
    assert "results=1" in message
    assert all(part in message for part in ("embed_ms", "vector_ms", "keyword_ms", "fuse_ms"))
    assert "owls" not in message
    settings.RAG_LOG_QUERIES = True
    caplog.clear()
    with caplog.at_level("INFO", logger="rag.search"):
        api_for(cast.bob).post("rag.search", {"query": "owls hunt mice", "mode": "keyword"})
    assert "owls hunt mice" in caplog.records[-1].getMessage()


def test_keyword_search_matches_a_chunk_by_the_headings_above_it(cast, api_for):
    intro = " ".join(["Volcanoes form where magma reaches the surface of the crust."] * 30)
    safety = " ".join(["Keep a safe distance and wear a respirator mask near the vents."] * 30)
    doc = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Field guide",
        text=f"# Volcanoes\n\n{intro}\n\n## Safety\n\n{safety}",
    )
    index_documents(document_ids=[doc.pk])
    chunks = Chunk.objects.filter(document=doc).order_by("chunk_index")
    safety_chunk = next(c for c in chunks if "## Safety" in c.chunk_text)
    assert "Volcanoes" not in safety_chunk.chunk_text, "the heading above is not in the chunk's own text"
    response = api_for(cast.bob).post("rag.search", {"query": "volcanoes respirator", "mode": "keyword"})
    assert response.json()["data"][0]["id"] == f"{doc.pk}:{doc.version}:{safety_chunk.chunk_index}"


@pytest.mark.django_db(transaction=True)
def test_hybrid_search_ranks_by_keyword_on_a_second_connection_with_the_same_results(cast, corpus, settings, request):
    # Committed data (a transactional test): the keyword ranking's own connection must see it.
    settings.RAG_CONCURRENT_SEARCH = True
    request.addfinalizer(close_background_connections)
    for user, expected in (
        (cast.alice, {"Owls", "Secret owls", "Draft owls"}),
        (cast.bob, {"Owls"}),
        (cast.charlie, {"Their owls"}),
    ):
        overlapped = search(user=user, query="owls hunt mice", threshold=0.0, mode="hybrid")
        assert "keyword_wait_ms" in overlapped.latency, "the keyword ranking ran on the search thread"
        stages = list(overlapped.latency)
        assert stages.index("graph_question_ms") < stages.index("keyword_wait_ms"), "the question's graph read while it ran"
        assert {d.title for d in overlapped.documents.values()} == expected
        settings.RAG_CONCURRENT_SEARCH = False
        serial = search(user=user, query="owls hunt mice", threshold=0.0, mode="hybrid")
        settings.RAG_CONCURRENT_SEARCH = True
        assert "keyword_wait_ms" not in serial.latency
        assert [(h.chunk_id, round(h.score, 9)) for h in overlapped.hits] == [
            (h.chunk_id, round(h.score, 9)) for h in serial.hits
        ]


def test_inside_a_transaction_hybrid_search_stays_on_its_own_connection(cast, corpus, settings):
    # This test's data is uncommitted: a second connection would not see it.
    settings.RAG_CONCURRENT_SEARCH = True
    result = search(user=cast.bob, query="owls hunt mice", threshold=0.0, mode="hybrid")
    assert "keyword_wait_ms" not in result.latency
    assert {d.title for d in result.documents.values()} == {"Owls"}
