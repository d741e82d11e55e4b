"""rag.answer's Server-Sent Events over a real HTTP connection to gunicorn, read event by event."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from pytest_django import DjangoDbBlocker

from permissions.services import api_token_create
from rag.indexing.pipeline import index_documents
from tests.conftest import Cast
from tests.factories import DocumentFactory
from tests.rag.texts import OWLS
from tests.servers import GunicornServer

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

TOKEN_DELAY = 0.15  # seconds the fake LLM waits before each piece of text


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GunicornServer]:
    server = GunicornServer(
        log_path=tmp_path_factory.mktemp("sse") / "gunicorn.log", extra_env={"RAG_FAKE_LLM_DELAY": str(TOKEN_DELAY)}
    ).start()
    yield server
    server.stop()


def read_events(response: httpx.Response) -> list[tuple[float, str, dict]]:
    """(arrival time, event, data) for each event, as the bytes arrive."""
    events, buffer = [], ""
    for text in response.iter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            events.append((time.monotonic(), fields["event"], json.loads(fields["data"])))
    assert buffer == "", "the stream ends on an event boundary"
    return events


def test_events_arrive_one_by_one_over_http(cast: Cast, server: GunicornServer) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS)
    index_documents(document_ids=[doc.pk])
    token = api_token_create(user=cast.bob).plaintext
    started = time.monotonic()
    with httpx.stream(
        "POST",
        f"{server.url}/api/rag.answer",
        json={"query": "What do owls hunt at night?", "stream": True},
        headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache, no-transform"
        events = read_events(response)
    names = [name for _, name, _ in events]
    assert names[-2:] == ["metadata", "done"] and names.count("done") == 1 and "error" not in names
    tokens = [(at, data["text"]) for at, name, data in events if name == "token"]
    answer = "".join(text for _, text in tokens)
    assert answer == "Owls hunt mice at night in the forest. [1]"
    citation = next(data for _, name, data in events if name == "citation")
    assert citation["document"]["title"] == "Owls" and OWLS[citation["start"] : citation["end"]] == citation["context"]
    assert names.index("citation") > names.index("token")
    # Unbuffered: the pieces arrive spread over the generation time, not all at the end.
    first_token, done_at = tokens[0][0], events[-1][0]
    assert len(tokens) >= 8 and done_at - first_token >= (len(tokens) - 2) * TOKEN_DELAY * 0.7
    assert first_token - started < done_at - started - 1.0
    done = events[-1][2]
    assert done["answer"] == answer and done["mode"] == "generated" and done["citations"] == [citation]


def test_an_error_before_the_stream_is_an_error_event_with_its_status(cast: Cast, server: GunicornServer) -> None:
    doc = DocumentFactory.create(collection=cast.private, created_by=cast.alice, title="Secret", text=OWLS)
    index_documents(document_ids=[doc.pk])
    token = api_token_create(user=cast.bob).plaintext
    with httpx.stream(
        "POST",
        f"{server.url}/api/rag.answer",
        json={"query": "owls hunt mice", "stream": True, "documentId": str(doc.pk)},
        headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        assert response.status_code == 404
        events = read_events(response)
    assert [(name, data) for _, name, data in events] == [("error", {"error": "not_found", "message": "Document not found."})]
