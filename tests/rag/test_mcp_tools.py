"""The MCP tools in-process: the switch they share with rag.*, and what an unexpected failure shows."""

from __future__ import annotations

import logging

import pytest

from config.errors import RagDisabled
from rag.mcp import server, tools


def test_rag_tools_are_off_when_rag_is_disabled_but_documents_still_read(cast, corpus, settings):
    settings.RAG_ENABLED = False
    for name, arguments in [("search", {"query": "owls"}), ("answer", {"query": "owls"}), ("find_entities", {})]:
        with pytest.raises(RagDisabled):
            tools.call(name, caller=tools.Caller(user=cast.bob, can_write=True), arguments=arguments)
    document = tools.call(
        "read_document", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"id": str(corpus["owls"].pk)}
    )
    assert document["data"]["title"] == "Owls"


@pytest.mark.django_db(transaction=True)
def test_an_unexpected_failure_is_a_server_error_that_hides_its_detail(cast, monkeypatch, caplog):
    def fail(**kwargs):
        raise RuntimeError("relation secret_table does not exist")

    monkeypatch.setattr(tools, "search_request", fail)
    with caplog.at_level(logging.ERROR, logger="rag.mcp"):
        result = server._call_tool("search", tools.Caller(user=cast.bob, can_write=False), {"query": "owls"})
    assert result.isError and result.structuredContent == {
        "error": "server_error",
        "message": "An unexpected error occurred. Quote request id - when reporting it.",
    }
    assert "secret_table" not in result.model_dump_json()
    assert "relation secret_table does not exist" in caplog.text
