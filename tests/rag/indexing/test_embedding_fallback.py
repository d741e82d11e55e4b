"""A remote embedding model that is down: the fallback model embeds instead, apart, and is replaced when the remote is back.

The remote model is a LiteLLM proxy faked at the network edge (respx): down, it answers 503; up, it
returns 8-dimensional vectors. The fallback is the fake provider with 384 dimensions, so a query
vector of one model meeting the other's chunks would be an error in PostgreSQL, not a quiet bad score.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import respx
from django.db import connection
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pytest_django import Settings

from documents.models import Document
from rag.answering.passages import retrieve
from rag.corpus import vector_index
from rag.indexing import fallback
from rag.indexing.cleanup import cleanup_embeddings
from rag.indexing.pipeline import index_documents, index_with_serving_models
from rag.models import Chunk, IndexState, IndexStatus
from rag.providers.embeddings import get_embedding_provider, reset_provider_cache
from rag.providers.fakes import FakeEmbeddingProvider
from rag.retrieval.search import search
from rag.tasks import reembed_fallback_task
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory
from tests.rag.texts import OWLS, VOLCANO

BASE = "http://embeddings.test"
REMOTE, REMOTE_DIMENSION = "remote-embedding", 8
FALLBACK, FALLBACK_DIMENSION = "fake-fallback", 384


@dataclass
class Remote:
    """The remote model's server: `up` or not, refusing texts with a `refused` word; how often it was asked."""

    up: bool = True
    refused: str | None = None
    requests: int = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if not self.up:
            return httpx.Response(503)
        texts = json.loads(request.content)["input"]
        if self.refused and any(self.refused in text for text in texts):
            return httpx.Response(400, json={"error": {"message": "input rejected"}})
        # Words hashed into 8 dimensions: texts sharing words point alike, as a real model's would.
        vectors = FakeEmbeddingProvider(model_id=REMOTE, dimension=REMOTE_DIMENSION).embed(texts)
        return httpx.Response(200, json={"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]})


@pytest.fixture
def remote(db: None, settings: Settings, respx_mock: respx.MockRouter) -> Iterator[Remote]:
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_EMBEDDING_MODEL = REMOTE
    settings.RAG_EMBEDDING_DIMENSION = REMOTE_DIMENSION
    settings.RAG_LITELLM_BASE_URL = BASE
    settings.RAG_EMBEDDING_MAX_RETRIES = 0
    settings.RAG_EMBEDDING_FALLBACK_MODEL = FALLBACK
    settings.RAG_EMBEDDING_FALLBACK_PROVIDER = "fake"
    settings.RAG_EMBEDDING_FALLBACK_DIMENSION = FALLBACK_DIMENSION
    settings.RAG_SIMILARITY_THRESHOLD = 0.0
    reset_provider_cache()
    # DDL must come before the test transaction's first write (deferred FK checks pend); an index
    # an earlier test created went with its transaction, whatever the module's memo says.
    vector_index._ensured.clear()
    vector_index.ensure_vector_index(REMOTE, REMOTE_DIMENSION)
    vector_index.ensure_vector_index(FALLBACK, FALLBACK_DIMENSION)
    server = Remote()
    respx_mock.post(f"{BASE}/embeddings").mock(side_effect=server)
    yield server
    reset_provider_cache()


def fallback_provider() -> FakeEmbeddingProvider:
    provider = get_embedding_provider(kind="fake", model_id=FALLBACK, dimension=FALLBACK_DIMENSION)
    assert isinstance(provider, FakeEmbeddingProvider)
    return provider


def models_of(document: Document) -> set[str]:
    return set(Chunk.objects.filter(document=document).values_list("model_id", flat=True))


def state(document: Document, model_id: str) -> str | None:
    return IndexStatus.objects.filter(document=document, model_id=model_id).values_list("state", flat=True).first()


@pytest.fixture
def owls(cast: Cast) -> Document:
    return DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS)


@pytest.fixture
def volcano(cast: Cast) -> Document:
    return DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Volcanoes", text=VOLCANO)


def test_with_the_remote_model_down_indexing_falls_back_instead_of_failing(remote: Remote, owls: Document) -> None:
    remote.up = False
    result = index_with_serving_models(document_ids=[owls.pk])
    assert (result.failed, result.fallback) == ({}, [owls.pk])
    assert models_of(owls) == {FALLBACK}


def test_the_fallbacks_chunks_are_its_own_models_vectors(remote: Remote, owls: Document) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT vector_dims(embedding) FROM document_embeddings WHERE document_id = %s", [owls.pk])
        assert cursor.fetchall() == [(FALLBACK_DIMENSION,)]


def test_the_remote_models_status_stays_failed_and_says_the_fallback_stands_in(remote: Remote, owls: Document) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    assert (state(owls, REMOTE), state(owls, FALLBACK)) == (IndexState.FAILED, IndexState.INDEXED)
    assert f"embedded with the fallback model {FALLBACK}" in IndexStatus.objects.get(document=owls, model_id=REMOTE).error


def test_with_the_fallback_off_the_document_fails(remote: Remote, owls: Document, settings: Settings) -> None:
    settings.RAG_EMBEDDING_FALLBACK_MODEL = ""
    remote.up = False
    result = index_with_serving_models(document_ids=[owls.pk])
    assert list(result.failed) == [owls.pk]
    assert models_of(owls) == set()


def test_a_backfill_or_a_direct_index_does_not_fall_back(remote: Remote, owls: Document) -> None:
    remote.up = False
    assert list(index_documents(document_ids=[owls.pk]).failed) == [owls.pk]
    assert models_of(owls) == set()


def test_while_the_remote_is_down_a_degraded_search_still_finds_the_fallbacks_document(
    remote: Remote, cast: Cast, api_for: ApiFor, owls: Document, volcano: Document
) -> None:
    index_with_serving_models(document_ids=[volcano.pk])
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    response = api_for(cast.bob).post("rag.search", {"query": "where do owls nest"})
    assert response.json()["degraded"] is True, "the remote cannot embed the query: keyword only"
    assert [hit["document"]["title"] for hit in response.json()["data"]][:1] == ["Owls"]


def test_a_vector_search_ranks_the_fallbacks_chunks_with_the_fallbacks_query_vector(
    remote: Remote, cast: Cast, owls: Document, volcano: Document
) -> None:
    index_with_serving_models(document_ids=[volcano.pk])
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    remote.up = True  # back, but the pass that embeds the owls again has not run yet
    result = search(user=cast.bob, query="where do owls nest", mode="vector")
    assert owls.pk in {hit.document_id for hit in result.hits}
    assert ["where do owls nest"] in fallback_provider().calls, "the fallback model embedded the query for its chunks"
    assert (result.model and result.model.model_id, result.fallback_model and result.fallback_model.model_id) == (
        REMOTE,
        FALLBACK,
    )


def test_a_hybrid_page_interleaves_the_two_models_pages(remote: Remote, cast: Cast, owls: Document, volcano: Document) -> None:
    index_with_serving_models(document_ids=[volcano.pk])
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    remote.up = True
    result = search(user=cast.bob, query="owls nest and volcanoes erupt", mode="hybrid", limit=2)
    assert [hit.document_id for hit in result.hits] == [volcano.pk, owls.pk], "the configured model's best, then the fallback's"


def test_an_answers_passage_from_the_fallback_is_weighed_by_the_fallbacks_query_vector(
    remote: Remote, cast: Cast, owls: Document, volcano: Document
) -> None:
    index_with_serving_models(document_ids=[volcano.pk])
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    remote.up = True
    passages = retrieve(user=cast.bob, query="where do owls nest", limit=4).passages
    owl = next(p for p in passages if p.document_id == owls.pk)
    query = fallback_provider().embed(["where do owls nest"])[0]
    chunk = Chunk.objects.get(pk=owl.chunk_id)
    assert chunk.model_id == FALLBACK
    assert owl.similarity == pytest.approx(sum(a * b for a, b in zip(query, chunk.embedding, strict=True)), abs=1e-5)


def test_a_team_with_only_the_fallbacks_chunks_can_search(remote: Remote, cast: Cast, owls: Document) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    result = search(user=cast.bob, query="owls", mode="keyword")
    assert [hit.document_id for hit in result.hits][:1] == [owls.pk]


def test_once_the_remote_is_back_the_periodic_pass_embeds_the_document_again_and_drops_the_fallbacks_chunks(
    remote: Remote, cast: Cast, owls: Document
) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    remote.up = True
    assert reembed_fallback_task() == {"reembedded": 1, "failed": 0, "left": 0}
    assert models_of(owls) == {REMOTE}
    assert (state(owls, REMOTE), state(owls, FALLBACK)) == (IndexState.INDEXED, None)
    assert search(user=cast.bob, query="where do owls nest", mode="vector").hits[0].document_id == owls.pk


def test_while_the_remote_is_still_down_the_pass_tries_one_batch_and_stops(
    remote: Remote, owls: Document, volcano: Document
) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk, volcano.pk])
    before = remote.requests
    assert reembed_fallback_task() == {"reembedded": 0, "failed": 2, "left": 2}
    assert remote.requests == before + 1, "one batch probed the remote"
    assert models_of(owls) == models_of(volcano) == {FALLBACK}


def test_a_document_the_remote_keeps_refusing_goes_to_the_back_of_the_next_pass(
    remote: Remote, cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fallback, "REEMBED_BATCH", 1)
    first, second = sorted(
        (DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, text=f"Notes {n} on owls.") for n in (1, 2)),
        key=lambda d: d.pk,
    )
    Document.objects.filter(pk=first.pk).update(text="Poison notes on owls.", version=first.version + 1)
    remote.up = False
    index_with_serving_models(document_ids=[first.pk, second.pk])
    remote.up, remote.refused = True, "Poison"
    reembed_fallback_task()  # the refused document is tried first and stops the pass
    reembed_fallback_task()  # now it waits behind the other
    assert (models_of(first), models_of(second)) == ({FALLBACK}, {REMOTE})


def test_an_edit_indexed_by_the_remote_drops_the_fallbacks_chunks_in_its_swap(remote: Remote, cast: Cast, owls: Document) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    remote.up = True
    Document.objects.filter(pk=owls.pk).update(text=OWLS + "\n\nOwls also eat voles.", version=owls.version + 1)
    index_with_serving_models(document_ids=[owls.pk])
    assert models_of(owls) == {REMOTE}


def test_the_metrics_count_the_documents_waiting_with_the_fallback(
    remote: Remote, owls: Document, settings: Settings, client: Client
) -> None:
    settings.METRICS_ENABLED, settings.METRICS_TOKEN = True, ""
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    scraped = {
        s.name: s.value for f in text_string_to_metric_families(client.get("/metrics").content.decode()) for s in f.samples
    }
    assert scraped["cairn_index_fallback_documents"] == 1


def test_cleanup_keeps_the_fallbacks_chunks(remote: Remote, owls: Document) -> None:
    remote.up = False
    index_with_serving_models(document_ids=[owls.pk])
    assert FALLBACK not in cleanup_embeddings().obsolete_models
    assert models_of(owls) == {FALLBACK}
