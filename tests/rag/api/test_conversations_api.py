"""Conversations through the API: follow-ups answered in context, and threads only their owner ever sees."""

from __future__ import annotations

import json
import uuid
from collections.abc import Generator
from typing import Any

import pytest
from pytest_django import Settings

from config.errors import ApplicationError
from documents.models import CollectionMembership, Document
from permissions.models import TokenScope
from rag.answering.answer import answer_complete, answer_events, answer_request
from rag.answering.followup import thread_for
from rag.answering.passages import retrieve
from rag.mcp import tools
from rag.models import Conversation, Feedback, QueryLog
from rag.providers.errors import PermanentProviderError
from rag.providers.fakes import FakeLLM
from tests.conftest import Api, ApiFor, Cast
from tests.rag.api.test_answer_api import events_of

QUESTION = "What do owls hunt at night?"


def answer(api: Api, query: str = QUESTION, **body: object) -> dict[str, Any]:
    response = api.post("rag.answer", {"query": query, **body})
    assert response.status_code == 200, response.content
    return response.json()["data"]


def cited_titles(data: dict[str, Any]) -> set[str]:
    return {c["document"]["title"] for c in data["citations"]}


def test_an_answer_without_a_conversation_starts_one_named_after_its_question(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    data = answer(api_for(cast.bob))
    conversation = Conversation.objects.get(pk=data["conversationId"])
    assert (conversation.user, conversation.team, conversation.title) == (cast.bob, cast.bob.team, QUESTION)
    assert QueryLog.objects.get(pk=data["id"]).conversation == conversation
    assert data["standaloneQuery"] == QUESTION


def test_each_answer_without_a_conversation_starts_another(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    api = api_for(cast.bob)
    assert answer(api)["conversationId"] != answer(api)["conversationId"]


def test_without_an_llm_a_follow_up_gets_the_earlier_questions_words_and_is_answered_from_them(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    alone = answer(api, "And what about them?")
    follow_up = answer(api, "And what about them?", conversationId=first["conversationId"])
    assert alone["mode"] == "insufficient", "on its own the follow-up finds nothing: the test would prove nothing"
    assert follow_up["standaloneQuery"] == "And what about them? (owls hunt night)"
    assert follow_up["conversationId"] == first["conversationId"]
    assert follow_up["mode"] == "extractive" and cited_titles(follow_up) == {"Owls"}
    log = QueryLog.objects.get(pk=follow_up["id"])
    assert (log.query, log.standalone_query) == ("And what about them?", follow_up["standaloneQuery"])


def test_a_question_that_stands_alone_is_searched_as_asked_inside_a_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    second = answer(api, "How does volcanic lava cool into basalt rock?", conversationId=first["conversationId"])
    assert second["standaloneQuery"] == "How does volcanic lava cool into basalt rock?"
    assert QueryLog.objects.get(pk=second["id"]).standalone_query == ""


def test_with_an_llm_the_follow_up_is_rewritten_by_it_and_the_answer_prompt_holds_the_earlier_turn(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    fake_llm.reset()
    fake_llm.responses = ['Standalone question: "Where do owls nest?"\nI replaced "they" with "owls".']
    follow_up = answer(api, "Where do they nest?", conversationId=first["conversationId"])
    assert follow_up["standaloneQuery"] == "Where do owls nest?"
    rewrite, generation = fake_llm.calls
    assert rewrite[-1]["content"].endswith("Follow-up question: Where do they nest?")
    assert f"Q: {QUESTION}" in rewrite[-1]["content"] and f"A: {first['answer'].replace(' [1]', '')}" in rewrite[-1]["content"]
    prompt = generation[-1]["content"]
    assert prompt.index("Earlier in this conversation") < prompt.index(f"Q: {QUESTION}") < prompt.index("<<<passage ")
    assert prompt.endswith("Question: Where do owls nest?")
    assert follow_up["mode"] == "generated" and "Barn owls nest in old barns" in follow_up["answer"]
    assert "rewriteMs" in follow_up["latency"]


def test_a_failing_rewrite_falls_back_to_the_rule_and_the_answer_still_comes(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    fake_llm.reset()
    fake_llm.failures = [PermanentProviderError("model gone")]
    follow_up = answer(api, "And where do they nest?", conversationId=first["conversationId"])
    assert follow_up["standaloneQuery"] == "And where do they nest? (owls hunt night)"
    assert len(fake_llm.calls) == 2 and follow_up["mode"] == "generated"


def test_the_prompt_holds_only_the_last_turns_the_setting_allows(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_CONVERSATION_TURNS = 1
    api = api_for(cast.bob)
    conversation = answer(api, "What do owls hunt at night?")["conversationId"]
    answer(api, "Why does volcanic lava cool into basalt?", conversationId=conversation)
    fake_llm.reset()
    answer(api, "And what about their feathers?", conversationId=conversation)
    rewrite = fake_llm.calls[0][-1]["content"]
    assert "Q: Why does volcanic lava cool into basalt?" in rewrite and "Q: What do owls hunt" not in rewrite


def test_the_stream_names_the_conversation_in_metadata_and_done(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    events = dict(
        events_of(
            api.post("rag.answer", {"query": "And their feathers?", "stream": True, "conversationId": first["conversationId"]})
        )
    )
    assert events["metadata"]["conversationId"] == events["done"]["conversationId"] == first["conversationId"]
    assert events["metadata"]["standaloneQuery"] == events["done"]["standaloneQuery"] == "And their feathers? (owls hunt night)"


def test_a_reader_who_leaves_mid_stream_adds_no_turn_to_the_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    first = answer(api_for(cast.bob))
    thread = thread_for(user=cast.bob, question="And their feathers?", conversation_id=first["conversationId"])
    events = answer_events(user=cast.bob, retrieval=retrieve(user=cast.bob, query=thread.standalone), thread=thread)
    assert next(events).name == "token"
    assert isinstance(events, Generator), "a reader leaves by closing the stream's generator"
    events.close()
    left = QueryLog.objects.get(error="client disconnected")
    assert left.conversation is None and QueryLog.objects.filter(conversation_id=first["conversationId"]).count() == 1


def test_a_conversation_deleted_while_its_follow_up_is_answered_gives_the_answer_a_new_one(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    first = answer(api_for(cast.bob))
    thread = thread_for(user=cast.bob, question="And their feathers?", conversation_id=first["conversationId"])
    Conversation.objects.filter(pk=first["conversationId"]).delete()
    data = answer_complete(
        answer_events(user=cast.bob, retrieval=retrieve(user=cast.bob, query=thread.standalone), thread=thread)
    )
    assert data.conversation_id is not None and data.conversation_id != first["conversationId"]
    assert Conversation.objects.get(pk=data.conversation_id).title == "And their feathers?"


@pytest.mark.parametrize("intruder", ["bob", "charlie"])
def test_nobody_else_can_continue_read_list_or_delete_a_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], intruder: str
) -> None:
    mine = answer(api_for(cast.alice))["conversationId"]
    api = api_for(getattr(cast, intruder))
    missing = str(uuid.uuid4())
    for endpoint, body in [
        ("rag.answer", {"query": "And their feathers?", "conversationId": mine}),
        ("conversations.info", {"id": mine}),
        ("conversations.update", {"id": mine, "title": "Mine now"}),
        ("conversations.delete", {"id": mine}),
    ]:
        response = api.post(endpoint, body)
        unknown = api.post(endpoint, {**body, **({"conversationId": missing} if "query" in body else {"id": missing})})
        assert response.status_code == 404, response.content
        assert response.json() == unknown.json() == {"error": "not_found", "message": "Conversation not found."}
    assert api.post("conversations.list").json()["data"] == []
    assert Conversation.objects.get(pk=mine).title == QUESTION
    assert QueryLog.objects.filter(conversation_id=mine).count() == 1, "no turn was added by the intruder"


@pytest.mark.parametrize("value", ["not-a-uuid", 123, ["x"]])
def test_a_malformed_conversation_id_is_invalid_input_not_a_server_error(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], value: object
) -> None:
    api = api_for(cast.bob)
    response = api.post("rag.answer", {"query": QUESTION, "conversationId": value})
    assert response.status_code == 400 and response.json()["error"] == "invalid_query"
    response = api.post("conversations.info", {"id": value})
    assert response.status_code == 400 and response.json()["error"] == "invalid_query"


def test_info_shows_the_turns_oldest_first_with_their_answers_and_citations(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    second = answer(api, "And what about them?", conversationId=first["conversationId"])
    data = api.post("conversations.info", {"id": first["conversationId"]}).json()["data"]
    assert (data["id"], data["title"], data["turnCount"]) == (first["conversationId"], QUESTION, 2)
    assert [t["id"] for t in data["turns"]] == [first["id"], second["id"]]
    turn = data["turns"][1]
    assert (turn["question"], turn["standaloneQuery"]) == ("And what about them?", "And what about them? (owls hunt night)")
    assert (turn["answer"], turn["citations"], turn["withheld"]) == (second["answer"], second["citations"], False)
    assert 'class="cite"' in turn["html"] and (turn["mode"], turn["confidence"]) == (second["mode"], second["confidence"])


def test_a_turn_whose_documents_you_can_no_longer_read_keeps_only_its_question(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    api = api_for(cast.alice)
    secret = answer(api, "What is the barn code?", limit=2)
    assert "4711" in secret["answer"] and "Secret owls" in cited_titles(secret), "the test needs a turn quoting the secret"
    conversation = secret["conversationId"]
    CollectionMembership.objects.filter(collection=cast.private, user=cast.alice).delete()

    body = api.post("conversations.info", {"id": conversation}).json()
    turn = body["data"]["turns"][0]
    assert turn["question"] == "What is the barn code?" and turn["withheld"] is True
    assert turn["answer"] is None and turn["html"] is None and turn["standaloneQuery"] is None
    assert "Secret owls" not in {c["document"]["title"] for c in turn["citations"]}
    assert "4711" not in json.dumps(body) and "secret" not in json.dumps(body).lower()

    fake_llm.reset()
    follow_up = answer(api, "And where is it written down?", conversationId=conversation)
    prompts = json.dumps(fake_llm.calls)
    assert "Q: What is the barn code?" in prompts, "the question, the user's own words, still gives context"
    assert "4711" not in prompts and "4711" not in json.dumps(follow_up)
    assert str(corpus["secret"].pk) not in {str(d) for d in QueryLog.objects.get(pk=follow_up["id"]).source_documents}


def test_a_turn_is_withheld_when_a_document_it_was_given_but_did_not_cite_is_no_longer_readable(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    question = "Owls hunt mice in the private barn"
    owls = next(p.n for p in retrieve(user=cast.alice, query=question, limit=3).passages if p.title == "Owls")
    fake_llm.response = f"Owls hunt mice [{owls}]."
    data = answer(api_for(cast.alice), question, limit=3)
    assert str(corpus["secret"].pk) in {str(d) for d in QueryLog.objects.get(pk=data["id"]).source_documents}
    assert "Secret owls" not in cited_titles(data)
    CollectionMembership.objects.filter(collection=cast.private, user=cast.alice).delete()
    turn = api_for(cast.alice).post("conversations.info", {"id": data["conversationId"]}).json()["data"]["turns"][0]
    assert turn["withheld"] is True and turn["answer"] is None


def test_a_follow_up_of_a_whole_turn_draws_on_its_documents_too(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    api = api_for(cast.alice)
    secret = answer(api, "What is the barn code?", limit=2)
    follow_up = answer(api, "How do volcanoes erupt lava?", conversationId=secret["conversationId"], limit=1)
    assert cited_titles(follow_up) == {"Volcanoes"}
    assert corpus["secret"].pk in QueryLog.objects.get(pk=follow_up["id"]).source_documents
    CollectionMembership.objects.filter(collection=cast.private, user=cast.alice).delete()
    turns = api.post("conversations.info", {"id": secret["conversationId"]}).json()["data"]["turns"]
    assert [t["withheld"] for t in turns] == [True, True], "its prompt quoted the secret answer"


def test_the_list_holds_your_conversations_most_recently_answered_first(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.alice)
    oldest = answer(api, "What do owls hunt at night?")["conversationId"]
    middle = answer(api, "How does lava cool?")["conversationId"]
    newest = answer(api, "What makes owl flight silent?")["conversationId"]
    answer(api_for(cast.bob))
    answer(api, "And their feathers?", conversationId=oldest)
    body = api.post("conversations.list", {"limit": 2}).json()
    assert [c["id"] for c in body["data"]] == [oldest, newest]
    assert body["pagination"] == {"limit": 2, "offset": 0, "total": 3}
    assert body["data"][0]["turnCount"] == 2 and body["data"][0]["title"] == "What do owls hunt at night?"
    assert [c["id"] for c in api.post("conversations.list", {"offset": 2}).json()["data"]] == [middle]


def test_deleting_a_conversation_keeps_its_answers_unlinked_with_their_feedback(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    data = answer(api)
    assert api.post("rag.feedback", {"answerId": data["id"], "rating": 5}).status_code == 200
    response = api.post("conversations.delete", {"id": data["conversationId"]})
    assert response.status_code == 200 and response.json()["data"]["id"] == data["conversationId"]
    assert not Conversation.objects.exists()
    assert QueryLog.objects.get(pk=data["id"]).conversation is None and Feedback.objects.get().rating == 5
    assert api.post("conversations.info", {"id": data["conversationId"]}).status_code == 404
    assert api.post("rag.answer", {"query": QUESTION, "conversationId": data["conversationId"]}).status_code == 404
    assert api.post("rag.feedback", {"answerId": data["id"], "rating": 4}).status_code == 200


def test_a_read_token_lists_and_reads_conversations_but_cannot_rename_or_delete_them(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    conversation = answer(api_for(cast.bob))["conversationId"]
    reader = api_for(cast.bob, TokenScope.READ)
    assert reader.post("conversations.list").status_code == 200
    assert reader.post("conversations.info", {"id": conversation}).status_code == 200
    assert reader.post("conversations.update", {"id": conversation, "title": "Renamed"}).status_code == 403
    assert reader.post("conversations.delete", {"id": conversation}).status_code == 403
    assert Conversation.objects.get(pk=conversation).title == QUESTION


def test_renaming_a_conversation_changes_its_title_and_nothing_else(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    older = answer(api)["conversationId"]
    newer = answer(api, "How does lava cool?")["conversationId"]
    before = api.post("conversations.info", {"id": older}).json()["data"]
    response = api.post("conversations.update", {"id": older, "title": "  Owls\n at   night "})
    assert response.status_code == 200, response.content
    renamed = response.json()["data"]
    assert renamed["title"] == "Owls at night"
    assert {key: renamed[key] for key in ("id", "turnCount", "createdAt", "updatedAt")} == {
        key: before[key] for key in ("id", "turnCount", "createdAt", "updatedAt")
    }
    listed = api.post("conversations.list").json()["data"]
    assert [(c["id"], c["title"]) for c in listed] == [(newer, "How does lava cool?"), (older, "Owls at night")]


@pytest.mark.parametrize(
    ("title", "message"),
    [
        ("   ", "title: This field may not be blank."),
        ("x" * 201, "title: Ensure this field has no more than 200 characters."),
        (None, "title: This field may not be null."),
    ],
)
def test_a_blank_or_too_long_title_is_refused(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], title: str | None, message: str
) -> None:
    api = api_for(cast.bob)
    conversation = answer(api)["conversationId"]
    response = api.post("conversations.update", {"id": conversation, "title": title})
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_query", "message": message}
    assert Conversation.objects.get(pk=conversation).title == QUESTION


def test_a_regenerated_answer_takes_the_place_of_the_newest_turn(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    replaced = answer(api, "Where do they nest?", conversationId=first["conversationId"])
    assert api.post("rag.feedback", {"answerId": replaced["id"], "rating": 1}).status_code == 200
    fake_llm.reset()
    again = answer(api, "Where do they nest?", conversationId=first["conversationId"], replaces=replaced["id"], fresh=True)
    assert again["conversationId"] == first["conversationId"] and again["id"] != replaced["id"]
    turns = api.post("conversations.info", {"id": first["conversationId"]}).json()["data"]["turns"]
    assert [t["id"] for t in turns] == [first["id"], again["id"]]
    prompts = json.dumps(fake_llm.calls)
    assert "Q: Where do they nest?" not in prompts, "the replaced turn is not an earlier turn of its own answer"
    assert f"Q: {QUESTION}" in prompts
    log = QueryLog.objects.get(pk=replaced["id"])
    assert log.conversation is None and Feedback.objects.get(query_log=log).rating == 1


@pytest.mark.parametrize("which", ["first", "unknown"])
def test_only_the_newest_turn_can_be_regenerated(cast: Cast, api_for: ApiFor, corpus: dict[str, Document], which: str) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    answer(api, "Where do they nest?", conversationId=first["conversationId"])
    replaces = first["id"] if which == "first" else str(uuid.uuid4())
    response = api.post("rag.answer", {"query": QUESTION, "conversationId": first["conversationId"], "replaces": replaces})
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_query", "message": "replaces: must be the newest answer of the conversation."}
    assert QueryLog.objects.filter(conversation_id=first["conversationId"]).count() == 2


def test_replacing_an_answer_needs_its_conversation(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    response = api.post("rag.answer", {"query": QUESTION, "replaces": first["id"]})
    assert response.status_code == 400 and response.json()["message"].startswith("replaces: needs the conversationId")
    assert QueryLog.objects.get(pk=first["id"]).conversation_id == uuid.UUID(first["conversationId"])


def test_a_regenerated_answer_left_mid_stream_leaves_the_turn_it_would_replace(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    first = answer(api_for(cast.bob))
    events = answer_request(
        user=cast.bob,
        query=QUESTION,
        conversation_id=uuid.UUID(first["conversationId"]),
        replaces=uuid.UUID(first["id"]),
        fresh=True,
        keep=True,
    )
    assert next(events).name == "token"
    events.close()
    assert QueryLog.objects.get(pk=first["id"]).conversation_id == uuid.UUID(first["conversationId"])
    assert QueryLog.objects.get(error="client disconnected").conversation is None


def test_the_mcp_answer_tool_continues_a_conversation_of_the_tokens_user_only(cast: Cast, corpus: dict[str, Document]) -> None:
    first = tools.call("answer", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"query": QUESTION})["data"]
    follow_up = tools.call(
        "answer",
        caller=tools.Caller(user=cast.bob, can_write=True),
        arguments={"query": "And what about them?", "conversationId": first["conversationId"]},
    )
    assert follow_up["data"]["conversationId"] == first["conversationId"]
    assert follow_up["data"]["standaloneQuery"] == "And what about them? (owls hunt night)"
    with pytest.raises(ApplicationError) as caught:
        tools.call(
            "answer",
            caller=tools.Caller(user=cast.alice, can_write=True),
            arguments={"query": "And what about them?", "conversationId": first["conversationId"]},
        )
    assert caught.value.code == "not_found"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "RAG_CONVERSATION_TURNS must be at least 0"),
        ("21", "RAG_CONVERSATION_TURNS must be at most 20"),
        ("many", "invalid value"),
    ],
)
def test_a_bad_conversation_setting_fails_at_start_up(value: str, message: str) -> None:
    from tests.test_project import run_settings

    result = run_settings("config.settings.local", DATABASE_URL="postgres://x@127.0.0.1:1/x", RAG_CONVERSATION_TURNS=value)
    assert result.returncode != 0 and message in result.stderr


def test_with_no_earlier_turns_allowed_a_follow_up_is_answered_on_its_own_in_the_same_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], settings: Settings
) -> None:
    settings.RAG_CONVERSATION_TURNS = 0
    api = api_for(cast.bob)
    first = answer(api)
    follow_up = answer(api, "And what about them?", conversationId=first["conversationId"])
    assert follow_up["standaloneQuery"] == "And what about them?" and follow_up["conversationId"] == first["conversationId"]


def test_a_repeated_follow_up_answered_from_the_cache_is_still_a_turn_of_its_conversation(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    """The same follow-up after the same earlier turn, in another conversation: the cache's, and that conversation's turn."""
    api = api_for(cast.bob)
    first, second = answer(api), answer(api)
    asked = answer(api, "And what about them?", conversationId=first["conversationId"])
    again = answer(api, "And what about them?", conversationId=second["conversationId"])
    assert (second["cached"], asked["cached"], again["cached"]) == (True, False, True), "the test would prove nothing"
    assert again["conversationId"] == second["conversationId"] and again["standaloneQuery"] == asked["standaloneQuery"]
    assert again["answer"] == asked["answer"] and again["id"] != asked["id"]
    log = QueryLog.objects.get(pk=again["id"])
    assert (str(log.conversation_id), log.query, log.standalone_query) == (
        second["conversationId"],
        "And what about them?",
        asked["standaloneQuery"],
    )
    assert {str(pk) for pk in log.source_documents} >= {c["document"]["id"] for c in asked["citations"]}
    turns = api.post("conversations.info", {"id": second["conversationId"]}).json()["data"]["turns"]
    assert [turn["id"] for turn in turns] == [second["id"], again["id"]]
    assert turns[1]["answer"] == asked["answer"]
    third = answer(api)
    streamed = events_of(
        api.post("rag.answer", {"query": "And what about them?", "conversationId": third["conversationId"], "stream": True})
    )
    done = [data for event, data in streamed if event == "done"][0]
    assert done["cached"] is True and done["conversationId"] == third["conversationId"]
    assert QueryLog.objects.get(pk=done["id"]).conversation_id == uuid.UUID(third["conversationId"])


def test_the_same_follow_up_after_different_turns_is_not_served_the_other_conversations_answer(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    """The earlier turns shape the prompt, so they are part of the cache key."""
    api = api_for(cast.bob)
    owls = answer(api)
    other = answer(api, "Where do owls sleep during the day?")
    fake_llm.response = "Mice [1]."
    first = answer(api, "Tell me more about owls hunting at night", conversationId=owls["conversationId"])
    second = answer(api, "Tell me more about owls hunting at night", conversationId=other["conversationId"])
    assert first["standaloneQuery"] == second["standaloneQuery"], "the same question searched: only the turns differ"
    assert (first["cached"], second["cached"]) == (False, False)


def test_session_id_continues_the_conversation_as_conversation_id_does(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    first = answer(api)
    follow_up = answer(api, "And what about them?", sessionId=first["conversationId"])
    assert follow_up["conversationId"] == first["conversationId"]
    assert follow_up["standaloneQuery"] == "And what about them? (owls hunt night)"


def test_session_id_and_conversation_id_naming_two_conversations_are_refused(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    api = api_for(cast.bob)
    first, second = answer(api), answer(api)
    response = api.post(
        "rag.answer", {"query": QUESTION, "conversationId": first["conversationId"], "sessionId": second["conversationId"]}
    )
    assert response.status_code == 400
    assert response.json()["message"] == "sessionId: names another conversation than conversationId."
