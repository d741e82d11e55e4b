"""rag.answer's metadata through the API and MCP: the extractive fast path, per-ranking counts, token counts, includeGraph.

The fake LLM stands at the network edge; search, the graph and the extractive answer are real.
"""

from __future__ import annotations

import json
import re

from django.http import StreamingHttpResponse
from pytest_django import Settings

from documents.models import Document
from rag.mcp import tools
from rag.providers.fakes import FakeLLM
from tests.conftest import ApiFor, Cast

QUESTION = "What do owls hunt at night?"


def test_with_an_llm_an_extractive_answer_confident_enough_skips_it(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE = "low"  # any extractive answer with evidence is enough
    data = api_for(cast.bob).post("rag.answer", {"query": QUESTION, "fresh": True}).json()["data"]
    assert (data["mode"], data["fastPath"], data["tokens"]) == ("extractive", True, None)
    assert fake_llm.calls == [], "the LLM was never asked"
    assert data["answer"].startswith("From your documents:") and data["citations"]


def test_below_the_fast_path_level_the_llm_answers_and_its_tokens_are_reported(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE = "off"
    fake_llm.response = "Owls hunt mice at night [1]."
    response = api_for(cast.bob).post("rag.answer", {"query": QUESTION, "stream": True})
    assert isinstance(response, StreamingHttpResponse), response
    raw = b"".join(response.streaming_content).decode()
    events = {m.group(1): json.loads(m.group(2)) for m in re.finditer(r"^event: (\w+)\ndata: (.*)$", raw, re.M)}
    done = events["done"]
    assert (done["mode"], done["fastPath"]) == ("generated", False) and len(fake_llm.calls) == 1
    prompt_words = sum(len(re.findall(r"\w+", m["content"])) for m in fake_llm.calls[0])
    # The fake counts words as tokens, as it reports them to /metrics.
    assert done["tokens"] == {"prompt": prompt_words, "completion": 6}
    assert events["metadata"]["tokens"] == done["tokens"] and events["metadata"]["rankings"] == done["rankings"]


def test_the_answer_counts_the_passages_each_ranking_found_and_include_graph_leaves_the_graph_out(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], settings: Settings
) -> None:
    api = api_for(cast.bob)
    with_graph = api.post("rag.answer", {"query": QUESTION}).json()["data"]
    rankings = with_graph["rankings"]
    assert set(rankings) == {"vector", "keyword", "graph"}
    assert rankings["vector"] >= 1 and rankings["keyword"] >= 1
    assert rankings["graph"] >= 1, "the question names the Owls document: the graph finds it"
    without = api.post("rag.answer", {"query": QUESTION, "includeGraph": False}).json()["data"]
    assert without["rankings"]["graph"] == 0 and without["cached"] is False, "not the answer cached with the graph"
    assert without["rankings"]["vector"] == rankings["vector"]
    through_mcp = tools.call(
        "answer", caller=tools.Caller(user=cast.bob, can_write=False), arguments={"query": QUESTION, "includeGraph": False}
    )
    assert through_mcp["data"]["rankings"]["graph"] == 0


def test_search_without_the_graph_finds_nothing_by_it(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    api = api_for(cast.bob)
    found_by = [hit["explain"]["foundBy"] for hit in api.post("rag.search", {"query": QUESTION, "explain": True}).json()["data"]]
    assert any("graph" in f for f in found_by)
    body = {"query": QUESTION, "explain": True, "includeGraph": False}
    assert all("graph" not in hit["explain"]["foundBy"] for hit in api.post("rag.search", body).json()["data"])
    refused = api.post("rag.search", {"query": QUESTION, "mode": "graph", "includeGraph": False})
    assert refused.status_code == 400 and "includeGraph" in refused.content.decode()


def test_with_the_graph_an_answer_crosses_from_a_film_to_its_directors_page_named_by_its_short_title(
    cast: Cast, api_for: ApiFor
) -> None:
    from rag.indexing.pipeline import index_documents
    from tests.factories import DocumentFactory

    film = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Eight Days a Week (film)",
        text="Eight Days a Week is a 1997 comedy film written and directed by Michael Davis.",
    )
    director = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Michael Davis (director)",
        text="Michael Davis (born 1961 in Rockville, Maryland) is an American director.",
    )
    index_documents(document_ids=[film.pk, director.pk])
    api = api_for(cast.bob)
    question = "Where was the director of film Eight Days A Week born?"
    data = api.post("rag.answer", {"query": question}).json()["data"]
    lead = data["answer"].splitlines()[0]
    assert lead.startswith("From your documents: Rockville, Maryland ["), data["answer"]
    assert {c["document"]["id"] for c in data["citations"]} == {str(film.pk), str(director.pk)}
    # The graph's part: without it nothing connects the film to its director's page.
    without = api.post("rag.answer", {"query": question, "includeGraph": False}).json()["data"]
    assert "Rockville" not in without["answer"].splitlines()[0]
