"""Tag filters in rag.search, rag.answer and the MCP tools: inside the visible scope, in SQL, in every mode."""

from __future__ import annotations

import pytest

from rag.indexing.pipeline import index_documents
from rag.mcp import tools
from rag.retrieval.search import search
from rag.retrieval.visibility import search_scope
from tests.factories import CollectionFactory, DocumentFactory

MODES = ["vector", "keyword", "hybrid", "graph"]
QUERY = "How do Barn Owls hunt mice?"


@pytest.fixture
def library(cast):
    """Bob reads the handbook; only some of its owl pages are tagged `birds`. Alice's private page and
    charlie's team's page carry the tag too."""
    docs = {
        "barn": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Barn Owls",
            text="Barn owls hunt mice at night.",
            tags=["birds", "night"],
        ),
        "guide": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Owl guide",
            text="Barn Owls hunt mice; owls hunt mice in fields. Owls hunt mice, owls hunt mice.",
        ),
        "tawny": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Tawny owls",
            text="Tawny owls hunt mice like Barn Owls do.",
            tags=["birds"],
        ),
        "secret": DocumentFactory(
            collection=cast.private,
            created_by=cast.alice,
            title="Secret owls",
            text="Barn Owls hunt mice in the private barn.",
            tags=["birds"],
        ),
        "theirs": DocumentFactory(
            collection=CollectionFactory(team=cast.charlie.team),
            created_by=cast.charlie,
            title="Their owls",
            text="Barn Owls hunt mice in another team.",
            tags=["birds"],
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def titles(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [hit["document"]["title"] for hit in response.json()["data"]]


@pytest.mark.parametrize("mode", MODES)
def test_a_tag_filter_keeps_only_tagged_documents_bob_can_read(cast, api_for, library, mode):
    bob = api_for(cast.bob)
    unfiltered = set(titles(bob.post("rag.search", {"query": QUERY, "mode": mode, "threshold": 0})))
    assert "Owl guide" in unfiltered or mode == "graph"
    found = set(titles(bob.post("rag.search", {"query": QUERY, "mode": mode, "threshold": 0, "tags": ["Birds"]})))
    assert found and found <= {"Barn Owls", "Tawny owls"}
    assert set(titles(bob.post("rag.search", {"query": QUERY, "mode": mode, "threshold": 0, "tags": ["birds", "night"]}))) <= {
        "Barn Owls"
    }


@pytest.mark.parametrize("mode", MODES)
def test_alice_and_charlie_find_their_own_tagged_documents(cast, api_for, library, mode):
    body = {"query": QUERY, "mode": mode, "threshold": 0, "tags": ["birds"]}
    assert "Secret owls" in titles(api_for(cast.alice).post("rag.search", body))
    assert set(titles(api_for(cast.charlie).post("rag.search", body))) == {"Their owls"}


def test_a_tag_nobody_uses_finds_nothing(cast, api_for, library):
    assert titles(api_for(cast.bob).post("rag.search", {"query": QUERY, "tags": ["reptiles"], "threshold": 0})) == []


def test_the_filter_is_applied_before_ranking_so_a_page_is_full(cast, library):
    """Many untagged pages outrank the tagged one; with the tag, the tagged ones still fill the page."""
    loud = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=f"Loud {i}", text="Barn Owls hunt mice. " * 5)
        for i in range(12)
    ]
    index_documents(document_ids=[d.pk for d in loud])
    for mode in ("vector", "keyword", "hybrid"):
        result = search(user=cast.bob, query=QUERY, mode=mode, limit=2, threshold=0, tags=["birds"])
        assert {result.documents[h.document_id].title for h in result.hits} == {"Barn Owls", "Tawny owls"}, mode


def test_a_tagged_scope_is_counted_and_cached_apart_from_the_whole_one(cast):
    whole, tagged = search_scope(user=cast.bob), search_scope(user=cast.bob, tags=["birds"])
    assert whole.cache_key != tagged.cache_key
    assert search_scope(user=cast.bob, tags=["b", "a"]).cache_key == search_scope(user=cast.bob, tags=["a", "b"]).cache_key


@pytest.mark.parametrize("tags", [["x" * 51], ["a,b"], "birds", [1], [f"t{i}" for i in range(11)]])
def test_bad_tags_are_invalid_query(cast, api_for, library, tags):
    response = api_for(cast.bob).post("rag.search", {"query": QUERY, "tags": tags})
    assert response.status_code == 400 and response.json()["error"] == "invalid_query"


def test_an_answer_cites_only_tagged_documents(cast, api_for, library, fake_llm):
    response = api_for(cast.bob).post("rag.answer", {"query": QUERY, "tags": ["night"]})
    assert response.status_code == 200, response.content
    cited = {citation["document"]["title"] for citation in response.json()["data"]["citations"]}
    assert cited == {"Barn Owls"}


def test_a_streamed_answer_takes_the_tag_filter_too(cast, api_for, library, fake_llm):
    response = api_for(cast.bob).post("rag.answer", {"query": QUERY, "tags": ["night"], "stream": True})
    body = b"".join(response.streaming_content).decode()
    assert "Barn Owls" in body and "Owl guide" not in body and "Tawny owls" not in body


def test_the_mcp_search_and_answer_tools_take_tags(cast, library, fake_llm):
    found = tools.call(
        "search",
        caller=tools.Caller(user=cast.bob, can_write=True),
        arguments={"query": QUERY, "tags": ["night"], "threshold": 0},
    )
    assert {hit["document"]["title"] for hit in found["data"]} == {"Barn Owls"}
    answer = tools.call(
        "answer", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"query": QUERY, "tags": ["night"]}
    )
    assert {c["document"]["title"] for c in answer["data"]["citations"]} == {"Barn Owls"}
    schema = tools.TOOLS["search"].input_schema()["properties"]["tags"]
    assert schema["type"] == "array" and schema["maxItems"] == 10 and schema["items"]["type"] == "string"


def test_the_mcp_search_tool_explains_when_asked(cast, library):
    found = tools.call(
        "search", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"query": QUERY, "explain": True, "threshold": 0}
    )
    assert all("foundBy" in hit["explain"] for hit in found["data"])


def test_rag_query_filters_by_tag(cast, library, capsys):
    from django.core.management import CommandError, call_command

    call_command("rag_query", "bob", QUERY, "--tag", "Night", "--threshold", "0")
    out = capsys.readouterr().out
    assert "Barn Owls" in out and "Owl guide" not in out and "Tawny owls" not in out
    with pytest.raises(CommandError, match="--tag: a tag must not contain a comma"):
        call_command("rag_query", "bob", QUERY, "--tag", "a,b")
