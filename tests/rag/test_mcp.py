"""/mcp driven by the MCP SDK's own client over real HTTP, against gunicorn serving config.wsgi as `make run` does."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import httpx
import pytest
from django.utils import timezone
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from permissions.models import ApiToken, TokenScope, User
from permissions.services import api_token_create, api_token_revoke
from rag.indexing.pipeline import index_documents
from rag.retrieval.explore import entity_list
from tests.factories import DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")
TOOLS = {"search", "answer", "read_document", "list_collections", "find_entities", "get_entity", "list_sources", "sync_source"}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    server = GunicornServer(log_path=tmp_path_factory.mktemp("mcp") / "gunicorn.log").start()
    yield server
    server.stop()


def token_for(user: User, scope: str = TokenScope.READ) -> str:
    return api_token_create(user=user, scope=scope).plaintext


def with_session(server: GunicornServer, token: str, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Connect with the SDK's client as `token`'s user, initialize, and run `use` on the session."""

    async def run() -> T:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await use(session)

    return asyncio.run(run())


def call(server: GunicornServer, token: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return with_session(server, token, lambda session: session.call_tool(name, arguments))


def body(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    text = result.content[0]
    assert isinstance(text, types.TextContent) and json.loads(text.text) == result.structuredContent
    assert result.structuredContent is not None
    return result.structuredContent


def error(result: types.CallToolResult) -> dict[str, Any]:
    assert result.isError
    assert result.structuredContent is not None
    text = result.content[0]
    assert isinstance(text, types.TextContent) and json.loads(text.text) == result.structuredContent
    return result.structuredContent


def titles(hits: list[dict]) -> set[str]:
    return {hit["document"]["title"] for hit in hits}


# The protocol


def test_a_client_initializes_and_lists_every_tool_with_its_input_schema(cast, server):
    async def use(session: ClientSession):
        return await session.list_tools()

    tools = {tool.name: tool for tool in with_session(server, token_for(cast.bob), use).tools}
    assert set(tools) == TOOLS
    search = tools["search"].inputSchema
    assert search["required"] == ["query"]
    assert search["properties"]["mode"]["enum"] == ["vector", "keyword", "hybrid", "graph"]
    assert search["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "default": 10,
        "description": "How many passages to return.",
    }
    assert search["properties"]["collectionId"]["format"] == "uuid"
    assert "stream" not in tools["answer"].inputSchema["properties"]
    assert all(tool.description and tool.annotations and tool.annotations.readOnlyHint for tool in tools.values())
    assert all(prop.get("description") for tool in tools.values() for prop in tool.inputSchema["properties"].values())


def test_the_server_names_itself_and_offers_tools_only(cast, server):
    async def use(session: ClientSession):
        return await session.initialize()

    result = with_session(server, token_for(cast.bob), use)
    assert result.serverInfo.name == "cairn"
    assert result.capabilities.tools is not None and result.capabilities.resources is None
    assert result.instructions and "search" in result.instructions


# Authentication: the API's tokens, the API's 401


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "Authentication credentials were not provided."),
        ({"Authorization": "Bearer cairn_000000000000_nope"}, "Invalid API token."),
        ({"Authorization": "Bearer not-a-token"}, "Invalid API token."),
        ({"Authorization": "Basic YWxpY2U6Y2Fpcm4tZGVtbw=="}, "Authentication credentials were not provided."),
    ],
)
def test_a_request_without_a_valid_token_is_unauthorized(server, db, headers, message):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    response = httpx.post(
        f"{server.url}/mcp", json=initialize, headers={"Accept": "application/json, text/event-stream", **headers}
    )
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized", "message": message}
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'


def test_an_expired_token_is_unauthorized(cast, server):
    token = api_token_create(user=cast.bob)
    ApiToken.objects.filter(pk=token.token.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = httpx.post(f"{server.url}/mcp", json={}, headers={"Authorization": f"Bearer {token.plaintext}"})
    assert (response.status_code, response.json()["message"]) == (401, "This API token has expired.")


def test_a_revoked_token_is_unauthorized(cast, server):
    token = api_token_create(user=cast.bob)
    api_token_revoke(token=token.token)
    response = httpx.post(f"{server.url}/mcp", json={}, headers={"Authorization": f"Bearer {token.plaintext}"})
    assert (response.status_code, response.json()["message"]) == (401, "This API token has been revoked.")


def test_the_sdk_client_cannot_initialize_without_a_valid_token(cast, server):
    with pytest.raises(BaseException) as raised:
        with_session(server, "cairn_000000000000_nope", lambda session: asyncio.sleep(0))
    statuses = [exc.response.status_code for exc in _leaves(raised.value) if isinstance(exc, httpx.HTTPStatusError)]
    assert statuses == [401]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def test_a_read_token_may_use_every_tool(cast, corpus, server):
    async def use(session: ClientSession):
        owls = (await session.call_tool("search", {"query": "owls", "mode": "keyword"})).structuredContent
        assert owls is not None
        document = owls["data"][0]["document"]["id"]
        entity = (await session.call_tool("find_entities", {"query": "owls"})).structuredContent
        assert entity is not None
        return [
            await session.call_tool(name, arguments)
            for name, arguments in [
                ("answer", {"query": "What do owls hunt at night?"}),
                ("read_document", {"id": document}),
                ("list_collections", {}),
                ("get_entity", {"id": entity["data"][0]["id"]}),
            ]
        ]

    assert not any(result.isError for result in with_session(server, token_for(cast.bob, TokenScope.READ), use))


def test_get_and_delete_are_not_allowed(cast, server):
    headers = {"Authorization": f"Bearer {token_for(cast.bob)}", "Accept": "text/event-stream"}
    for method in ("GET", "DELETE"):
        response = httpx.request(method, f"{server.url}/mcp", headers=headers)
        assert response.status_code == 405, method
        assert response.json()["error"] == "method_not_allowed" and response.headers["Allow"] == "POST"


def test_concurrent_agents_each_get_their_own_users_results(cast, corpus, server):
    tokens = {"alice": token_for(cast.alice), "bob": token_for(cast.bob)}

    async def search_as(name: str) -> tuple[str, set[str]]:
        headers = {"Authorization": f"Bearer {tokens[name]}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("search", {"query": "owls hunt mice", "mode": "keyword"})
                    return name, titles(body(result)["data"])

    async def run() -> list[tuple[str, set[str]]]:
        return await asyncio.gather(*(search_as(name) for name in ["alice", "bob"] * 6))

    seen = {"alice": {"Owls", "Secret owls"}, "bob": {"Owls"}}
    assert all(found == seen[name] for name, found in asyncio.run(run()))


def test_a_tool_call_logs_under_its_requests_id(cast, corpus, server):
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "list_collections", "arguments": {}}}
    headers = {
        "Authorization": f"Bearer {token_for(cast.bob)}",
        "Accept": "application/json, text/event-stream",
        "X-Request-ID": "mcp-log-check-1",
    }
    response = httpx.post(f"{server.url}/mcp", json=message, headers=headers)
    assert response.status_code == 200 and response.headers["X-Request-ID"] == "mcp-log-check-1"
    assert response.json()["result"]["structuredContent"]["pagination"]["total"] == 1
    assert "[mcp-log-check-1] mcp tool=list_collections" in server.log_path.read_text()


def test_a_body_over_the_upload_limit_is_refused_before_the_transport(cast, server, settings):
    headers = {"Authorization": f"Bearer {token_for(cast.bob)}", "Content-Type": "application/json"}
    response = httpx.post(f"{server.url}/mcp", content=b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1), headers=headers)
    assert (response.status_code, response.json()["error"]) == (413, "request_too_large")


# The tools, through the access policy


def test_search_ranks_only_the_passages_the_user_may_read(cast, corpus, server):
    arguments = {"query": "owls hunt mice", "mode": "keyword", "limit": 10}
    for_bob = body(call(server, token_for(cast.bob), "search", arguments))
    for_alice = body(call(server, token_for(cast.alice), "search", arguments))
    assert titles(for_bob["data"]) == {"Owls"}
    assert "4711" not in json.dumps(for_bob)  # the private document's barn code
    assert titles(for_alice["data"]) == {"Owls", "Secret owls"}
    assert titles(body(call(server, token_for(cast.charlie), "search", arguments))["data"]) == {"Their owls"}


def test_search_results_have_the_rest_shape(cast, corpus, server):
    result = body(call(server, token_for(cast.bob), "search", {"query": "owls", "mode": "hybrid", "limit": 2}))
    assert set(result) == {"data", "pagination", "degraded"}
    assert result["pagination"] == {"limit": 2, "count": len(result["data"])}
    hit = result["data"][0]
    assert set(hit) == {"id", "document", "score", "context", "chunkIndex"}
    assert set(hit["document"]) == {"id", "title", "url", "collectionId", "updatedAt"}
    assert hit["id"] == f"{hit['document']['id']}:1:{hit['chunkIndex']}"


def test_search_in_another_users_private_collection_is_not_found(cast, corpus, server):
    result = call(server, token_for(cast.bob), "search", {"query": "owls", "collectionId": str(cast.private.pk)})
    assert error(result) == {"error": "not_found", "message": "Collection not found."}


def test_answer_cites_only_passages_the_user_may_read(cast, corpus, server):
    answer = body(call(server, token_for(cast.bob), "answer", {"query": "Where do owls hunt mice?", "limit": 5}))["data"]
    assert answer["answer"] and answer["citations"]
    assert {citation["document"]["title"] for citation in answer["citations"]} <= {"Owls", "Volcanoes"}
    assert "4711" not in json.dumps(answer)
    citation = answer["citations"][0]
    assert set(citation) == {
        "n",
        "document",
        "version",
        "chunkIndex",
        "start",
        "end",
        "chunkStart",
        "chunkEnd",
        "score",
        "context",
        "page",
        "quote",
        "lines",
        "location",
    }
    assert citation["lines"] is not None and citation["location"].startswith("Owls:")
    assert citation["document"]["id"] == str(corpus["owls"].pk) and "Owls hunt mice" in citation["context"]


def test_answer_for_alice_may_cite_her_private_document(cast, corpus, server):
    answer = body(call(server, token_for(cast.alice), "answer", {"query": "Where do owls secretly hunt mice?", "limit": 5}))
    cited = {citation["document"]["title"] for citation in answer["data"]["citations"]}
    assert "Secret owls" in cited


def test_read_document_returns_a_visible_documents_text(cast, corpus, server):
    document = body(call(server, token_for(cast.bob), "read_document", {"id": str(corpus["owls"].pk)}))["data"]
    assert document["title"] == "Owls" and document["text"] == corpus["owls"].text
    assert (document["textOffset"], document["textLength"]) == (0, len(corpus["owls"].text))
    assert document["collectionId"] == str(cast.handbook.pk) and document["source"] is None


def test_read_document_pages_through_a_long_text(cast, corpus, server):
    arguments = {"id": str(corpus["owls"].pk), "offset": 2, "maxChars": 4}
    document = body(call(server, token_for(cast.bob), "read_document", arguments))["data"]
    assert document["text"] == corpus["owls"].text[2:6] == "Owls"
    assert document["textLength"] == len(corpus["owls"].text)


def test_an_invisible_document_and_a_missing_one_look_the_same(cast, corpus, server):
    token = token_for(cast.bob)
    invisible = error(call(server, token, "read_document", {"id": str(corpus["secret"].pk)}))
    missing = error(call(server, token, "read_document", {"id": str(uuid.uuid4())}))
    assert invisible == missing == {"error": "not_found", "message": "Document not found."}
    assert body(call(server, token_for(cast.alice), "read_document", {"id": str(corpus["secret"].pk)}))


def test_list_collections_lists_the_collections_the_user_may_read(cast, corpus, server):
    for_bob = body(call(server, token_for(cast.bob), "list_collections", {}))
    assert [c["name"] for c in for_bob["data"]] == ["Handbook"]
    assert for_bob["pagination"] == {"limit": 25, "offset": 0, "total": 1}
    for_alice = body(call(server, token_for(cast.alice), "list_collections", {"limit": 1, "offset": 1}))
    assert [c["name"] for c in for_alice["data"]] == ["Private"] and for_alice["pagination"]["total"] == 2


def test_find_entities_counts_only_visible_mentions(cast, corpus, server):
    for_bob = body(call(server, token_for(cast.bob), "find_entities", {"query": "secret"}))
    for_alice = body(call(server, token_for(cast.alice), "find_entities", {"query": "secret"}))
    assert for_bob == {"data": [], "pagination": {"limit": 25, "offset": 0, "total": 0}}
    assert "Secret owls" in {entity["name"] for entity in for_alice["data"]}


def test_get_entity_of_an_invisible_entity_is_the_same_not_found_as_a_missing_one(cast, corpus, server):
    entities, _ = entity_list(user=cast.alice, query="secret owls")
    secret = next(entity for entity in entities if entity.name == "Secret owls")
    token = token_for(cast.bob)
    invisible = error(call(server, token, "get_entity", {"id": str(secret.id)}))
    missing = error(call(server, token, "get_entity", {"id": str(uuid.uuid4())}))
    assert invisible == missing == {"error": "not_found", "message": "Entity not found."}
    detail = body(call(server, token_for(cast.alice), "get_entity", {"id": str(secret.id)}))["data"]
    assert detail["entity"]["name"] == "Secret owls"
    assert {passage["title"] for passage in detail["passages"]} == {"Secret owls"}


def test_find_entities_and_get_entity_spell_an_entity_as_the_callers_passages_do(cast, server):
    """Not as a private document that named it first: an oddly cased guess reads back in its own spelling."""
    plans = DocumentFactory.create(
        collection=cast.private, created_by=cast.alice, title="Plans", text="Project Nightjar starts in May."
    )
    index_documents(document_ids=[plans.pk])
    guess = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Guess", text="PRoject NightJAR starts soon."
    )
    index_documents(document_ids=[guess.pk])
    token = token_for(cast.bob)
    found = body(call(server, token, "find_entities", {"query": "nightjar"}))["data"]
    assert [entity["name"] for entity in found] == ["PRoject NightJAR"]
    assert body(call(server, token, "get_entity", {"id": found[0]["id"]}))["data"]["entity"]["name"] == "PRoject NightJAR"
    alice = body(call(server, token_for(cast.alice), "find_entities", {"query": "nightjar"}))["data"]
    assert [(entity["name"], entity["mentions"]) for entity in alice] == [("PRoject NightJAR", 2)], "a tie: byte order"


def test_charlie_sees_nothing_of_another_team(cast, corpus, server):
    token = token_for(cast.charlie)
    assert error(call(server, token, "read_document", {"id": str(corpus["owls"].pk)}))["error"] == "not_found"
    answer = body(call(server, token, "answer", {"query": "What do owls hunt at night?"}))["data"]
    assert {citation["document"]["title"] for citation in answer["citations"]} <= {"Their owls"}
    assert "Owls" not in {e["name"] for e in body(call(server, token, "find_entities", {"query": "owls"}))["data"]}


# Bad input: a tool error with the API's message, never a server error


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search", {}, ("invalid_query", "query: This field is required.")),
        ("search", {"query": "ow"}, ("invalid_query", "query: must be at least 3 characters.")),
        ("search", {"query": "owls", "limit": 500}, ("invalid_query", "limit: Ensure this value is less than or equal to 50.")),
        ("search", {"query": "owls", "limit": "5"}, ("invalid_query", "limit: must be an integer.")),
        ("search", {"query": "owls", "mode": "psychic"}, ("invalid_query", 'mode: "psychic" is not a valid choice.')),
        ("search", {"query": "owls", "collectionId": "nope"}, ("invalid_query", "collectionId: Must be a valid UUID.")),
        (
            "search",
            {"query": "owls", "colour": "red"},
            (
                "invalid_query",
                "colour: no such argument; search takes query, limit, threshold, collectionId, documentId, includeContext, mode, weights, "
                "tags, explain, includeGraph.",
            ),
        ),
        (
            "answer",
            {"query": "owls", "stream": True},
            (
                "invalid_query",
                "stream: no such argument; answer takes query, collectionId, documentId, limit, tags, conversationId, sessionId, includeGraph.",
            ),
        ),
        ("read_document", {"id": 7}, ("validation_error", "id: must be a string.")),
        (
            "read_document",
            {"id": str(uuid.uuid4()), "maxChars": 0},
            ("validation_error", "maxChars: Ensure this value is greater than or equal to 1."),
        ),
        ("list_collections", {"limit": 0}, ("validation_error", "limit: Ensure this value is greater than or equal to 1.")),
        ("get_entity", {}, ("invalid_query", "id: This field is required.")),
        (
            "summon",
            {},
            (
                "invalid_query",
                "No tool named 'summon'; the tools are search, answer, read_document, list_collections, find_entities, get_entity, list_sources, sync_source.",
            ),
        ),
    ],
)
def test_bad_input_is_a_tool_error_with_a_clear_message(cast, server, name, arguments, expected):
    assert tuple(error(call(server, token_for(cast.bob), name, arguments)).values()) == expected


def test_a_team_with_nothing_indexed_gets_no_embeddings(cast, server):
    assert error(call(server, token_for(cast.bob), "search", {"query": "owls"}))["error"] == "no_embeddings"


# Malformed messages: the JSON-RPC error, never a server error

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "message",
    [
        deep(100_000),
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": {"query": '
        + deep(100_000)
        + "}}}",
    ],
    ids=["the-whole-message", "a-tool-argument"],
)
def test_a_message_nested_too_deeply_is_a_json_rpc_parse_error(cast, server, message: str) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token_for(cast.bob)}"}
    response = httpx.post(f"{server.url}/mcp", content=message.encode(), headers=headers)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": types.PARSE_ERROR, "message": "Parse error: the message is nested too deeply."},
    }


def test_a_message_that_is_not_utf8_is_a_json_rpc_parse_error(cast, server) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token_for(cast.bob)}"}
    response = httpx.post(f"{server.url}/mcp", content=b'{"jsonrpc": "2.0", "\xfd": 1}', headers=headers)
    assert response.status_code == 400
    assert response.json()["error"] == {"code": types.PARSE_ERROR, "message": "Parse error: the message is not UTF-8."}


def test_a_message_that_is_not_json_is_a_json_rpc_parse_error(cast, server) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token_for(cast.bob)}"}
    response = httpx.post(f"{server.url}/mcp", content=b"{nope", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == types.PARSE_ERROR


@pytest.mark.parametrize("depth", [200, 900])
def test_a_deep_but_parsable_tool_argument_is_a_tool_error(cast, server, depth: int) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": {}}}
    text = json.dumps(message).replace('"arguments": {}', f'"arguments": {{"query": {deep(depth)}}}')
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token_for(cast.bob)}"}
    response = httpx.post(f"{server.url}/mcp", content=text.encode(), headers=headers)
    assert response.status_code < 500, response.text[:500]
