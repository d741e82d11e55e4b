"""Embedding providers: one retry layer for transient failures, fast failure for permanent ones."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from rag.indexing.pipeline import index_documents
from rag.models import IndexState, IndexStatus
from rag.providers import retry
from rag.providers.embeddings import get_embedding_provider, reset_provider_cache
from rag.providers.errors import (
    PermanentProviderError,
    TransientProviderError,
    parse_retry_after,
)
from tests.factories import DocumentFactory

BASE = "http://llm.test"


def embeddings_response(request: httpx.Request, dimension: int = 384) -> httpx.Response:
    texts = __import__("json").loads(request.content)["input"]
    return httpx.Response(
        200, json={"data": [{"index": i, "embedding": [1.0] + [0.0] * (dimension - 1)} for i in range(len(texts))]}
    )


@pytest.fixture
def proxy(settings):
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_EMBEDDING_MODEL = "text-embedding-3-small"
    settings.RAG_LITELLM_BASE_URL = BASE
    settings.RAG_EMBEDDING_MAX_RETRIES = 3
    reset_provider_cache()
    return get_embedding_provider()


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Record backoff sleeps instead of sleeping; jitter takes the top of its range."""
    recorded: list[float] = []
    monkeypatch.setattr(retry, "sleep", recorded.append)
    monkeypatch.setattr(retry, "jitter", lambda low, high: high)
    return recorded


def test_a_429_is_retried_after_the_servers_retry_after_then_succeeds(proxy, sleeps, respx_mock):
    route = respx_mock.post(f"{BASE}/embeddings").mock(
        side_effect=[httpx.Response(429, headers={"Retry-After": "7"}), embeddings_response]
    )
    vectors = proxy.embed(["one", "two"])
    assert len(vectors) == 2 and len(vectors[0]) == 384
    assert route.call_count == 2
    assert sleeps == [7.0], "Retry-After is longer than the backoff, so it wins"


def test_server_errors_and_timeouts_back_off_exponentially(proxy, sleeps, respx_mock):
    route = respx_mock.post(f"{BASE}/embeddings").mock(
        side_effect=[httpx.Response(503), httpx.ConnectTimeout("slow"), httpx.Response(502), embeddings_response]
    )
    assert len(proxy.embed(["text"])) == 1
    assert route.call_count == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_transient_errors_give_up_after_max_retries(proxy, sleeps, respx_mock):
    route = respx_mock.post(f"{BASE}/embeddings").respond(500)
    with pytest.raises(TransientProviderError, match="500"):
        proxy.embed(["text"])
    assert route.call_count == 4, "one try and RAG_EMBEDDING_MAX_RETRIES=3 retries, in exactly one layer"


def test_a_permanent_error_fails_fast_with_the_servers_message(proxy, sleeps, respx_mock):
    route = respx_mock.post(f"{BASE}/embeddings").respond(404, json={"error": {"message": "model not found"}})
    with pytest.raises(PermanentProviderError, match="model not found"):
        proxy.embed(["text"])
    assert route.call_count == 1 and sleeps == []


def test_a_very_long_retry_after_is_raised_rather_than_slept(proxy, sleeps, respx_mock):
    respx_mock.post(f"{BASE}/embeddings").respond(429, headers={"Retry-After": "3600"})
    with pytest.raises(TransientProviderError) as info:
        proxy.embed(["text"])
    assert info.value.retry_after == 3600 and sleeps == []


def test_retry_after_reads_seconds_and_http_dates():
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: retry now
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_texts_are_sent_in_batches_of_rag_batch_size(settings, sleeps, respx_mock):
    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_LITELLM_BASE_URL = BASE
    settings.RAG_BATCH_SIZE = 4
    reset_provider_cache()
    route = respx_mock.post(f"{BASE}/embeddings").mock(side_effect=embeddings_response)
    assert len(get_embedding_provider().embed([f"text {i}" for i in range(10)])) == 10
    sizes = [len(__import__("json").loads(call.request.content)["input"]) for call in route.calls]
    assert sizes == [4, 4, 2]


def test_indexing_rides_out_a_rate_limit(cast, proxy, sleeps, respx_mock):
    respx_mock.post(f"{BASE}/embeddings").mock(
        side_effect=[httpx.Response(429, headers={"Retry-After": "1"}), embeddings_response]
    )
    document = DocumentFactory(collection=cast.handbook, text="# Title\n\nSome text to embed.")
    index_documents(document_ids=[document.pk])
    status = IndexStatus.objects.get(document=document, model_id="text-embedding-3-small")
    assert status.state == IndexState.INDEXED and status.indexed_version == document.version
    assert sleeps == [1.0]


def test_the_litellm_provider_retries_in_our_layer_only(settings, sleeps, respx_mock):
    settings.RAG_EMBEDDING_PROVIDER = "litellm"
    settings.RAG_EMBEDDING_MODEL = "openai/text-embedding-3-small"
    settings.RAG_LITELLM_BASE_URL = f"{BASE}/v1"
    settings.RAG_LITELLM_API_KEY = "sk-test"
    settings.RAG_EMBEDDING_MAX_RETRIES = 2
    reset_provider_cache()
    route = respx_mock.post(f"{BASE}/v1/embeddings").mock(
        side_effect=[httpx.Response(429, json={"error": {"message": "slow down"}}), embeddings_response]
    )
    assert len(get_embedding_provider().embed(["text"])) == 1
    assert route.call_count == 2, "litellm and the OpenAI client must not retry on their own"
    assert len(sleeps) == 1


@pytest.mark.slow_model
def test_the_local_model_embeds_offline_and_related_sentences_score_higher(settings):
    settings.RAG_EMBEDDING_PROVIDER = "local"
    settings.RAG_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
    reset_provider_cache()
    provider = get_embedding_provider()
    query, related, unrelated = np.array(
        provider.embed(
            ["How do I reset my password?", "Steps to change a forgotten account password", "The recipe needs two cups of flour"]
        )
    )
    assert query.shape == (384,)
    assert np.allclose([np.linalg.norm(v) for v in (query, related, unrelated)], 1.0, atol=1e-5)
    assert query @ related > 0.5 > query @ unrelated
    # Deterministic, and a query embeds like the same text among passages.
    assert np.allclose(provider.embed_query("How do I reset my password?"), query, atol=1e-5)
