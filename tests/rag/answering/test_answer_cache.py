"""The answer cache: repeated questions answered from it, never past the asker's access nor a change of what they read."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest
from django.http import StreamingHttpResponse
from pytest_django import Settings

from documents.models import Document
from documents.services import (
    collection_membership_remove,
    collection_membership_set,
    document_create,
    document_membership_remove,
    document_membership_set,
    document_update,
)
from permissions.models import Access, Group
from rag import receivers
from rag.answering import cache as answer_cache
from rag.answering.answer import answer_complete, answer_question, answer_request
from rag.api.answer import STREAM_OUTPUTS
from rag.api.sse import sse_stream
from rag.indexing.pipeline import index_documents
from rag.models import Feedback, QueryLog
from rag.providers.errors import TransientProviderError
from rag.providers.fakes import FakeLLM
from tests.conftest import Api, ApiFor, Cast
from tests.rag.api.test_answer_api import events_of

if TYPE_CHECKING:
    # Imported for annotations only: a module-level TestBroker is a class pytest tries to collect.
    from tests.conftest import TestBroker

QUESTION = "What do owls hunt at night?"
SECRET_QUESTION = "What is the barn code?"


def ask(api: Api, query: str = QUESTION, **body: object) -> dict[str, Any]:
    response = api.post("rag.answer", {"query": query, **body})
    assert response.status_code == 200, response.content
    return response.json()["data"]


@pytest.fixture
def missed_signals(monkeypatch: pytest.MonkeyPatch) -> None:
    """No change gives the team a new cache token: only the check in SQL stands between a cached answer and the asker."""
    monkeypatch.setattr(receivers, "team_changed", lambda team_id: None)


def test_a_repeated_question_is_answered_from_the_cache_without_the_llm(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    first, second = ask(bob), ask(bob)
    assert len(fake_llm.calls) == 1
    assert first["cached"] is False and second["cached"] is True
    assert (second["answer"], second["citations"], second["mode"]) == (first["answer"], first["citations"], first["mode"])
    assert second["confidence"] == first["confidence"]
    assert set(second["latency"]) == {"cacheMs", "totalMs"}


def test_a_cached_answer_is_logged_as_an_answer_of_its_own_that_takes_feedback(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    first, second = ask(bob), ask(bob)
    assert second["id"] != first["id"]
    log = QueryLog.objects.get(pk=second["id"])
    assert (log.user, log.query, log.answer, log.citations) == (cast.bob, QUESTION, first["answer"], first["citations"])
    assert "cacheMs" in log.latency and log.total_ms > 0
    assert bob.post("rag.feedback", {"answerId": second["id"], "rating": 5}).status_code == 200
    assert Feedback.objects.get().query_log_id == log.pk


def test_questions_differing_only_in_spacing_share_an_answer(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    assert ask(bob, f"  {QUESTION.replace(' ', '   ')} ")["cached"] is True
    assert len(fake_llm.calls) == 1


@pytest.mark.parametrize(
    "body", [{"limit": 1}, {"query": QUESTION.lower()}, {"documentId": "owls"}, {"collectionId": "handbook"}]
)
def test_another_limit_case_or_scope_is_another_question(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, body: dict[str, Any]
) -> None:
    scope = {"owls": str(corpus["owls"].pk), "handbook": str(cast.handbook.pk)}
    body = {key: scope.get(value, value) for key, value in body.items()}
    bob = api_for(cast.bob)
    ask(bob)
    assert ask(bob, **{"query": QUESTION, **body})["cached"] is False
    assert len(fake_llm.calls) == 2


def test_a_stream_is_answered_from_the_cache_with_the_same_events(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    fresh = events_of(bob.post("rag.answer", {"query": QUESTION, "stream": True}))
    cached = events_of(bob.post("rag.answer", {"query": QUESTION, "stream": True}))
    assert len(fake_llm.calls) == 1
    assert [name for name, _ in cached if name != "token"] == [name for name, _ in fresh if name != "token"]
    text = "".join(data["text"] for name, data in cached if name == "token")
    assert text == "".join(data["text"] for name, data in fresh if name == "token") == cached[-1][1]["answer"]
    names = [name for name, _ in cached]
    assert names.index("citation") > names.index("token"), "a citation follows the token that cites it"
    metadata, done = cached[-2][1], cached[-1][1]
    assert metadata["cached"] is True and done["cached"] is True and "cacheMs" in done["latency"]
    assert done["html"] == fresh[-1][1]["html"] and done["citations"] == fresh[-1][1]["citations"]
    assert done["id"] == metadata["id"] != fresh[-1][1]["id"]


def test_a_json_answer_serves_a_stream_and_the_other_way_round(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    assert events_of(bob.post("rag.answer", {"query": QUESTION, "stream": True}))[-1][1]["cached"] is True
    events_of(bob.post("rag.answer", {"query": "Do volcanoes erupt lava?", "stream": True}))
    assert ask(bob, "Do volcanoes erupt lava?")["cached"] is True
    assert len(fake_llm.calls) == 2


def test_the_mcp_answer_tool_answers_a_repeated_question_from_the_cache(
    cast: Cast, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    from rag.mcp.tools import Caller, call

    first, again = (
        call("answer", caller=Caller(user=cast.bob, can_write=True), arguments={"query": QUESTION})["data"] for _ in range(2)
    )
    assert (first["cached"], again["cached"]) == (False, True) and again["answer"] == first["answer"]
    assert len(fake_llm.calls) == 1


def test_one_users_cached_answer_is_never_served_to_another(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob_answer = ask(api_for(cast.bob), "owls hunt mice in the barn")
    for user, titles in [(cast.charlie, {"Their owls"}), (cast.alice, {"Owls", "Secret owls"})]:
        data = ask(api_for(user), "owls hunt mice in the barn")
        assert data["cached"] is False, user.username
        assert {c["document"]["title"] for c in data["citations"]} <= titles
        assert data["id"] != bob_answer["id"]
    assert len(fake_llm.calls) == 3


def test_an_edited_document_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    assert "mice" in ask(bob)["answer"]
    document_update(document=corpus["owls"], text="# Owls\n\nOwls hunt voles at night in the meadow.")
    index_documents(document_ids=[corpus["owls"].pk])
    data = ask(bob)
    assert data["cached"] is False and "voles" in data["answer"] and "mice" not in data["answer"]
    assert data["citations"][0]["version"] == 2
    assert ask(bob)["cached"] is True


def test_an_edit_not_indexed_yet_is_not_answered_from_the_old_version(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, missed_signals: None
) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    document_update(document=corpus["owls"], text="# Owls\n\nOwls hunt voles at night in the meadow.")
    assert ask(bob)["cached"] is False, "the cited version is not the document's any more"


def test_a_renamed_document_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, missed_signals: None
) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    document_update(document=corpus["owls"], title="Night birds")
    data = ask(bob)
    assert data["cached"] is False and data["citations"][0]["document"]["title"] == "Night birds"


@pytest.mark.parametrize("signals", ["sent", "missed"])
def test_a_revoked_membership_is_honoured_on_the_very_next_request(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, signals: str
) -> None:
    collection_membership_set(collection=cast.private, user=cast.bob)
    bob = api_for(cast.bob)
    assert "4711" in ask(bob, SECRET_QUESTION)["answer"]
    assert ask(bob, SECRET_QUESTION)["cached"] is True
    if signals == "missed":
        monkeypatch.setattr(receivers, "team_changed", lambda team_id: None)
    collection_membership_remove(collection=cast.private, user=cast.bob)
    response = bob.post("rag.answer", {"query": SECRET_QUESTION})
    body = response.content.decode()
    assert response.status_code == 200 and response.json()["data"]["cached"] is False
    assert "4711" not in body and "Secret owls" not in body and str(corpus["secret"].pk) not in body
    streamed = bob.post("rag.answer", {"query": SECRET_QUESTION, "stream": True})
    assert isinstance(streamed, StreamingHttpResponse), streamed
    stream = b"".join(streamed.streaming_content).decode()
    assert "4711" not in stream and str(corpus["secret"].pk) not in stream


def test_a_revoked_document_membership_is_honoured_on_the_very_next_request(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, missed_signals: None
) -> None:
    document_membership_set(document=corpus["secret"], user=cast.bob)
    bob = api_for(cast.bob)
    ask(bob, SECRET_QUESTION)
    assert ask(bob, SECRET_QUESTION)["cached"] is True
    document_membership_remove(document=corpus["secret"], user=cast.bob)
    assert "4711" not in json.dumps(ask(bob, SECRET_QUESTION))


def test_leaving_a_group_is_honoured_on_the_very_next_request(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    group = Group.objects.create(team=cast.private.team, name="Barn keepers")
    group.members.add(cast.bob)
    collection_membership_set(collection=cast.private, group=group)
    bob = api_for(cast.bob)
    ask(bob, SECRET_QUESTION)
    assert ask(bob, SECRET_QUESTION)["cached"] is True
    group.members.remove(cast.bob)
    data = ask(bob, SECRET_QUESTION)
    assert data["cached"] is False and "4711" not in json.dumps(data)


@pytest.mark.parametrize("signals", ["sent", "missed"])
def test_a_collection_closed_to_the_team_is_honoured_on_the_very_next_request(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, request: pytest.FixtureRequest, signals: str
) -> None:
    if signals == "missed":
        request.getfixturevalue("missed_signals")
    bob = api_for(cast.bob)
    assert ask(bob)["citations"][0]["document"]["title"] == "Owls"
    cast.handbook.default_access = Access.NONE
    cast.handbook.save()
    data = ask(bob)
    assert data["cached"] is False and data["citations"] == [] and "mice" not in data["answer"]


def test_a_collection_opened_to_the_team_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    assert "4711" not in ask(bob, SECRET_QUESTION)["answer"]
    cast.private.default_access = Access.READ
    cast.private.save()
    data = ask(bob, SECRET_QUESTION)
    assert data["cached"] is False and "4711" in data["answer"]


def test_a_scope_the_asker_can_no_longer_see_is_not_found_even_when_cached(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, missed_signals: None
) -> None:
    collection_membership_set(collection=cast.private, user=cast.bob)
    bob = api_for(cast.bob)
    body = {"query": SECRET_QUESTION, "collectionId": str(cast.private.pk)}
    bob.post("rag.answer", body)
    assert bob.post("rag.answer", body).json()["data"]["cached"] is True
    collection_membership_remove(collection=cast.private, user=cast.bob)
    response = bob.post("rag.answer", body)
    assert response.status_code == 404 and response.json()["error"] == "not_found"


def test_a_new_document_that_answers_ends_a_cached_insufficient_answer(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    """Insufficient answers are cached too: they are the answer over those documents, until the documents change."""
    bob = api_for(cast.bob)
    question = "What is quantum chromodynamics on a lattice?"
    assert ask(bob, question)["mode"] == "insufficient"
    assert ask(bob, question)["cached"] is True
    doc = document_create(
        by=cast.alice,
        collection=cast.handbook,
        title="Lattice QCD",
        text="Quantum chromodynamics on a lattice discretises spacetime into a grid.",
        publish=True,
    )
    index_documents(document_ids=[doc.pk])
    data = ask(bob, question)
    assert data["cached"] is False and data["mode"] == "generated"
    assert data["citations"][0]["document"]["title"] == "Lattice QCD"


def test_an_answer_given_while_a_document_was_indexed_is_not_kept_once_its_chunks_are_in(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    question = "What is quantum chromodynamics on a lattice?"
    doc = document_create(
        by=cast.alice,
        collection=cast.handbook,
        title="Lattice QCD",
        text="Quantum chromodynamics on a lattice discretises spacetime into a grid.",
        publish=True,
    )
    assert ask(bob, question)["mode"] == "insufficient", "not indexed yet"
    assert ask(bob, question)["cached"] is True
    index_documents(document_ids=[doc.pk])
    assert ask(bob, question)["mode"] == "generated"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RAG_LLM_MODEL", "another-fake-llm"),
        ("RAG_ANSWER_MIN_SCORE", 0.01),
        ("RAG_HYBRID_WEIGHTS", (1.0, 1.0, 1.0)),
        ("RAG_GRAPH_ENABLED", False),
        ("RAG_LLM_MAX_TOKENS", 100),
        ("RAG_RERANK_MODEL", "fake-rerank"),
    ],
)
def test_a_model_or_answer_setting_change_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings, name: str, value: object
) -> None:
    bob = api_for(cast.bob)
    key_before = answer_cache.answer_settings()
    ask(bob)
    setattr(settings, name, value)
    assert answer_cache.answer_settings() != key_before
    assert ask(bob)["cached"] is False


def test_a_changed_prompt_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    monkeypatch.setattr(answer_cache, "SYSTEM_PROMPT", answer_cache.SYSTEM_PROMPT + "\n- Answer in French.")
    assert ask(bob)["cached"] is False and len(fake_llm.calls) == 2


def test_an_answer_after_an_llm_failure_is_not_cached(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    fake_llm.failures = [TransientProviderError("503"), TransientProviderError("503 again")]
    bob = api_for(cast.bob)
    assert ask(bob)["mode"] == "extractive"
    data = ask(bob)
    assert data["cached"] is False and data["mode"] == "generated"
    assert ask(bob)["cached"] is True


def test_a_stream_the_reader_left_is_not_cached(cast: Cast, corpus: dict[str, Document], fake_llm: FakeLLM) -> None:
    events = answer_question(user=cast.bob, query=QUESTION)
    assert next(events).name == "token"
    assert isinstance(events, Generator), "a reader leaves by closing the stream's generator"
    events.close()
    assert answer_complete(answer_question(user=cast.bob, query=QUESTION)).cached is False
    assert len(fake_llm.calls) == 2


def test_a_server_sent_stream_whose_reader_left_stops_the_answer_caches_nothing_and_adds_no_turn(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    """The WSGI server closes the response's stream when a write to a reader who left fails (the page's Stop)."""
    events = answer_request(user=cast.bob, query=QUESTION, keep=True)
    stream = sse_stream(events, STREAM_OUTPUTS)
    assert next(stream).startswith(b"event: token")
    assert isinstance(stream, Generator), "the WSGI server closes the response's stream"
    stream.close()
    assert inspect.getgeneratorstate(events) == inspect.GEN_CLOSED, "closed by the stream, not whenever it is collected"
    left = QueryLog.objects.get()
    assert (left.error, left.conversation) == ("client disconnected", None)
    assert ask(api_for(cast.bob))["cached"] is False
    assert len(fake_llm.calls) == 2


def test_a_fresh_answer_skips_the_cache_and_replaces_its_entry(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    fake_llm.responses = ["Mice [1]."]
    fake_llm.response = "Mice and voles [1]."
    assert ask(bob)["answer"] == "Mice [1]."
    fresh = ask(bob, fresh=True)
    assert (fresh["cached"], fresh["answer"]) == (False, "Mice and voles [1].")
    again = ask(bob)
    assert (again["cached"], again["answer"]) == (True, "Mice and voles [1].")
    assert len(fake_llm.calls) == 2


def test_errors_are_not_cached(cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM) -> None:
    bob = api_for(cast.bob)
    body = {"query": QUESTION, "documentId": str(corpus["secret"].pk)}
    assert bob.post("rag.answer", body).status_code == 404
    document_membership_set(document=corpus["secret"], user=cast.bob)
    assert bob.post("rag.answer", body).json()["data"]["cached"] is False


def test_with_the_cache_off_every_question_is_answered_afresh(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_ANSWER_CACHE = False
    bob = api_for(cast.bob)
    assert [ask(bob)["cached"] for _ in range(2)] == [False, False]
    assert len(fake_llm.calls) == 2


def test_entries_expire_after_the_ttl(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_ANSWER_CACHE_TTL = 1
    bob = api_for(cast.bob)
    ask(bob)
    time.sleep(1.1)
    assert ask(bob)["cached"] is False


def test_the_cache_works_on_redis(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings, test_broker: TestBroker
) -> None:
    """Production's cache (make run, docker-compose): Redis, through the cache that misses when Redis is down."""
    settings.CACHES = {"default": {"BACKEND": "config.cache.TolerantRedisCache", "LOCATION": test_broker.redis_url}}
    collection_membership_set(collection=cast.private, user=cast.bob)
    bob = api_for(cast.bob)
    assert ask(bob, SECRET_QUESTION)["cached"] is False
    assert ask(bob, SECRET_QUESTION)["cached"] is True
    collection_membership_remove(collection=cast.private, user=cast.bob)
    data = ask(bob, SECRET_QUESTION)
    assert data["cached"] is False and data["mode"] == "insufficient" and "4711" not in json.dumps(data)


def test_a_cache_that_is_down_answers_as_a_miss(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "config.cache.TolerantRedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # the discard port: nothing answers
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    bob = api_for(cast.bob)
    assert [ask(bob)["cached"] for _ in range(2)] == [False, False]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_ANSWER_CACHE", "perhaps", "RAG_ANSWER_CACHE must be true or false"),
        ("RAG_ANSWER_CACHE_TTL", "0", "RAG_ANSWER_CACHE_TTL must be at least 1"),
        ("RAG_ANSWER_CACHE_TTL", "an hour", "RAG_ANSWER_CACHE_TTL"),
    ],
)
def test_a_bad_answer_cache_setting_fails_at_start_up(name: str, value: str, message: str) -> None:
    from tests.test_project import run_settings

    result = run_settings("config.settings.local", DATABASE_URL="postgres://x@127.0.0.1:1/x", **{name: value})
    assert result.returncode != 0 and message in result.stderr


def test_a_tag_filter_is_another_question(cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM) -> None:
    bob = api_for(cast.bob)
    ask(bob)
    assert ask(bob, tags=["birds"])["cached"] is False
    assert ask(bob, tags=["birds"])["cached"] is True
