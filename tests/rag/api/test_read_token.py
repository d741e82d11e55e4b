"""What a read-scoped token may do with answers: ask, and be answered, but keep no conversation and rate nothing."""

from __future__ import annotations

import pytest

from config.errors import ApplicationError
from documents.models import Document
from permissions.models import TokenScope
from rag.mcp import tools
from rag.models import Conversation, QueryLog
from rag.providers.fakes import FakeLLM
from tests.conftest import ApiFor, Cast
from tests.rag.api.test_answer_api import events_of

QUESTION = "What do owls hunt at night?"


def test_a_read_token_cannot_rate_an_answer(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    answer = api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]
    response = api_for(cast.bob, TokenScope.READ).post("rag.feedback", {"answerId": answer["id"], "rating": 1})
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert not QueryLog.objects.get(pk=answer["id"]).feedback.exists()


def test_a_read_token_is_answered_but_starts_no_conversation(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    response = api_for(cast.bob, TokenScope.READ).post("rag.answer", {"query": QUESTION})
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    assert data["answer"] and data["conversationId"] is None
    assert not Conversation.objects.exists()
    assert QueryLog.objects.get(pk=data["id"]).conversation is None


def test_a_read_token_streamed_answer_starts_no_conversation(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    response = api_for(cast.bob, TokenScope.READ).post("rag.answer", {"query": QUESTION, "stream": True})
    assert response.status_code == 200
    done = dict(events_of(response))["done"]
    assert done["answer"] and done["conversationId"] is None
    assert not Conversation.objects.exists()


def test_a_read_token_cannot_add_a_turn_to_a_conversation(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    conversation = api_for(cast.bob).post("rag.answer", {"query": QUESTION}).json()["data"]["conversationId"]
    response = api_for(cast.bob, TokenScope.READ).post("rag.answer", {"query": "And where?", "conversationId": conversation})
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert QueryLog.objects.filter(conversation_id=conversation).count() == 1


def test_a_read_tokens_mcp_answer_starts_no_conversation_and_continues_none(cast: Cast, corpus: dict[str, Document]) -> None:
    reader = tools.Caller(user=cast.bob, can_write=False)
    answer = tools.call("answer", caller=reader, arguments={"query": QUESTION})["data"]
    assert answer["conversationId"] is None and not Conversation.objects.exists()
    conversation = tools.call("answer", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"query": QUESTION})
    with pytest.raises(ApplicationError) as caught:
        tools.call(
            "answer", caller=reader, arguments={"query": "And where?", "conversationId": conversation["data"]["conversationId"]}
        )
    assert caught.value.code == "forbidden"


def test_a_read_token_answered_from_the_cache_starts_no_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    reader = api_for(cast.bob, TokenScope.READ)
    first, again = (reader.post("rag.answer", {"query": QUESTION}).json()["data"] for _ in range(2))
    assert (first["cached"], again["cached"]) == (False, True)
    assert again["conversationId"] is None and not Conversation.objects.exists()
    assert QueryLog.objects.get(pk=again["id"]).conversation is None
