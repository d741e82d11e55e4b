"""The real LiteLLM client against a mocked provider over HTTP (respx): streaming, one retry, timeouts, rerank."""

from __future__ import annotations

import json

import httpx
import pytest

from rag.providers import retry
from rag.providers.litellm_client import import_litellm, provider_error

QUESTION = "What do owls hunt at night?"
CHAT = "http://llm.test/v1/chat/completions"


def chat_stream(*pieces: str) -> httpx.Response:
    body = (
        "".join(
            "data: "
            + json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            )
            + "\n\n"
            for piece in pieces
        )
        + "data: [DONE]\n\n"
    )
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


@pytest.fixture
def litellm_settings(settings, monkeypatch):
    settings.RAG_LLM_PROVIDER = "litellm"
    settings.RAG_LLM_MODEL = "openai/test-model"
    settings.RAG_LLM_BASE_URL = "http://llm.test/v1"
    settings.RAG_LLM_API_KEY = "sk-test"
    settings.RAG_LLM_TIMEOUT = 2.0
    monkeypatch.setattr(retry, "sleep", lambda seconds: None)
    return settings


def test_a_streamed_litellm_answer_is_cited(cast, api_for, corpus, litellm_settings, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=chat_stream("Owls hunt mi", "ce at night [", "1] and [", "8]."))
    data = api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]
    assert data["mode"] == "generated" and data["answer"] == "Owls hunt mice at night [1] and."
    assert data["citations"][0]["document"]["title"] == "Owls"
    request = json.loads(route.calls[0].request.content)
    assert request["model"] == "test-model" and request["stream"] is True and request["max_tokens"] == 800
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-test"
    assert "Owls hunt mice at night in the forest." in request["messages"][1]["content"]


def test_one_retry_then_the_extractive_fallback(cast, api_for, corpus, litellm_settings, respx_mock):
    route = respx_mock.post(CHAT).mock(
        side_effect=[httpx.Response(503, json={"error": {"message": "busy"}}), chat_stream("Fine [1].")]
    )
    assert api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]["mode"] == "generated"
    assert route.call_count == 2, "litellm and the OpenAI SDK must not retry on their own"
    route.side_effect = None
    route.mock(return_value=httpx.Response(503, json={"error": {"message": "busy"}}))
    route.reset()
    litellm_settings.RAG_ANSWER_CACHE = False  # the same question again must reach the model, not the answer cache
    data = api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]
    assert data["mode"] == "extractive" and data["citations"] and route.call_count == 2


def test_a_timeout_falls_back_and_a_bad_key_is_not_retried(cast, api_for, corpus, litellm_settings, respx_mock):
    route = respx_mock.post(CHAT).mock(side_effect=httpx.ReadTimeout("slow"))
    assert api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]["mode"] == "extractive"
    assert route.call_count == 2
    route.reset()
    route.side_effect = None
    route.mock(return_value=httpx.Response(401, json={"error": {"message": "bad key"}}))
    assert api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]["mode"] == "extractive"
    assert route.call_count == 1


def test_the_litellm_reranker_reorders_and_a_failing_one_is_ignored(cast, api_for, corpus, litellm_settings, respx_mock):
    litellm_settings.RAG_RERANK_MODEL = "cohere/rerank-test"
    litellm_settings.RAG_LLM_BASE_URL = "http://llm.test"
    respx_mock.post("http://llm.test/chat/completions").mock(return_value=chat_stream("See [1]."))
    rerank = respx_mock.post("http://llm.test/v2/rerank").mock(
        side_effect=lambda request: httpx.Response(
            200,
            json={
                "id": "r",
                "meta": {},
                "results": [
                    {"index": i, "relevance_score": 0.1 + i / 100} for i in range(len(json.loads(request.content)["documents"]))
                ],
            },
        )
    )
    data = api_for(cast.alice).post("rag.answer", {"query": "owls hunt mice"}).json()["data"]
    documents = json.loads(rerank.calls[0].request.content)["documents"]
    # The mocked reranker likes the last candidate best: it becomes passage [1], with the reranker's score.
    assert len(documents) >= 2 and data["citations"][0]["context"] == documents[-1]
    assert data["citations"][0]["score"] == pytest.approx(0.1 + (len(documents) - 1) / 100)
    rerank.side_effect = None
    rerank.mock(return_value=httpx.Response(500, json={"message": "down"}))
    assert api_for(cast.alice).post("rag.answer", {"query": "owls hunt mice"}).json()["data"]["mode"] == "generated"


def test_litellm_errors_are_classified_transient_or_permanent():
    litellm = import_litellm()
    transient = provider_error(litellm, litellm.RateLimitError("slow", llm_provider="openai", model="m"))
    permanent = provider_error(litellm, litellm.AuthenticationError("no", llm_provider="openai", model="m"))
    assert transient.transient and not permanent.transient
