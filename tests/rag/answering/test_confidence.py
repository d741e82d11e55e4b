"""Confidence with reasons: the rule on hand-made evidence, then the factors as rag.answer returns them."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.http import StreamingHttpResponse
from django.utils import timezone
from pytest_django import Settings

from documents.models import Document
from rag.answering.confidence import Evidence, assess_confidence
from rag.mcp import tools
from rag.providers.fakes import FakeLLM
from tests.conftest import Api, ApiFor, Cast

NOW = datetime(2025, 6, 1, tzinfo=UTC)
FRESH, OLD = NOW - timedelta(days=10), NOW - timedelta(days=400)
A, B = uuid.UUID(int=1), uuid.UUID(int=2)
# With the threshold at 0.25, strength 0.4 (high) is similarity 0.55, strength 0.15 (medium) is 0.3625.
THRESHOLD = 0.25


def level(*evidence: tuple[float, uuid.UUID, datetime | None], stale_after_days: int = 365) -> str:
    items = [Evidence(similarity=s, document_id=d, version_time=t) for s, d, t in evidence]
    return assess_confidence(items, threshold=THRESHOLD, stale_after_days=stale_after_days, now=NOW).level


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        ((), "insufficient"),
        (((0.2, A, FRESH), (0.1, B, FRESH)), "insufficient"),
        (((0.3, A, FRESH),), "low"),
        (((0.45, A, FRESH),), "medium"),
        (((0.9, A, FRESH), (0.3, A, FRESH)), "high"),
    ],
)
def test_each_level_on_hand_made_evidence(evidence: tuple[tuple[float, uuid.UUID, datetime | None], ...], expected: str) -> None:
    assert level(*evidence) == expected


def test_a_closer_best_passage_raises_the_level() -> None:
    assert level((0.3, A, FRESH)) == "low"
    assert level((0.45, A, FRESH)) == "medium"


def test_one_passage_alone_is_at_most_medium_and_a_second_makes_it_high() -> None:
    assert level((0.9, A, FRESH)) == "medium"
    assert level((0.9, A, FRESH), (0.3, A, FRESH)) == "high"


def test_a_passage_below_the_threshold_supports_nothing() -> None:
    assert level((0.9, A, FRESH), (0.2, B, FRESH)) == "medium"


def test_a_second_document_raises_the_level_one_step() -> None:
    assert level((0.45, A, FRESH), (0.3, A, FRESH)) == "medium"
    assert level((0.45, A, FRESH), (0.3, B, FRESH)) == "high"
    assert level((0.3, A, FRESH), (0.26, A, FRESH)) == "low"
    assert level((0.3, A, FRESH), (0.26, B, FRESH)) == "medium"


def test_old_evidence_lowers_the_level_one_step_but_never_below_low() -> None:
    assert level((0.9, A, OLD), (0.3, A, OLD)) == "medium"
    assert level((0.45, A, OLD)) == "low"
    assert level((0.3, A, OLD)) == "low"


def test_one_recent_supporting_version_is_enough_to_count_as_recent() -> None:
    assert level((0.9, A, OLD), (0.3, A, FRESH)) == "high"


def test_recency_does_not_count_when_stale_days_is_zero_or_the_time_is_unknown() -> None:
    assert level((0.9, A, OLD), (0.3, A, OLD), stale_after_days=0) == "high"
    assert level((0.9, A, None), (0.3, A, None)) == "high"


def test_the_factors_and_reasons_say_why() -> None:
    evidence = [Evidence(0.7, A, OLD), Evidence(0.4, B, OLD), Evidence(0.1, B, FRESH)]
    assessment = assess_confidence(evidence, threshold=THRESHOLD, stale_after_days=365, now=NOW)
    factors = assessment.factors
    assert assessment.level == "medium"
    assert factors["topSimilarity"] == 0.7 and factors["threshold"] == THRESHOLD and factors["strength"] == 0.6
    assert (factors["supportingPassages"], factors["supportingDocuments"]) == (2, 2)
    assert factors["newestVersionAgeDays"] == 400.0, "the fresh passage is below the threshold: it is no evidence"
    assert factors["staleAfterDays"] == 365
    assert factors["reasons"] == [
        "The best passage's similarity 0.70 clears the threshold 0.25 by 60% of the room above it: high.",
        "The newest supporting version is 400 days old (over 365): one level down, medium.",
    ]


def test_an_overruling_adds_its_reason_only_when_it_changes_the_level() -> None:
    assessment = assess_confidence([Evidence(0.3, A, FRESH)], threshold=THRESHOLD, stale_after_days=365, now=NOW)
    assert assessment.overruled("low", "Anything") is assessment
    overruled = assessment.overruled("insufficient", "No sentence answers")
    assert overruled.level == "insufficient" and overruled.factors["reasons"][-1] == "No sentence answers: insufficient."
    assert assessment.factors["reasons"] != overruled.factors["reasons"], "the original is left as it was"


QUESTION = "Where do owls hunt mice?"
CITE_ALL = "Owls hunt mice [1][2][3][4][5]."


def answer(api: Api, **body: object) -> dict[str, Any]:
    response = api.post("rag.answer", {"query": QUESTION, "limit": 5, **body})
    assert response.status_code == 200, response.content
    return response.json()["data"]


def test_the_answer_returns_its_confidence_factors(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    fake_llm.response = CITE_ALL
    data = answer(api_for(cast.bob))
    factors = data["confidenceFactors"]
    assert set(factors) == {
        "topSimilarity",
        "threshold",
        "strength",
        "supportingPassages",
        "supportingDocuments",
        "newestVersionAgeDays",
        "staleAfterDays",
        "reasons",
    }
    assert factors["threshold"] == settings.RAG_ANSWER_MIN_SCORE and factors["reasons"]
    assert 1 <= factors["supportingDocuments"] <= factors["supportingPassages"] <= len(data["citations"])
    assert 0 <= factors["newestVersionAgeDays"] < 1, "the corpus was written just now"
    assert data["confidence"] in factors["reasons"][-1]


def test_the_stream_sends_the_factors_in_metadata_and_done(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    fake_llm.response = CITE_ALL
    response = api_for(cast.bob).post("rag.answer", {"query": QUESTION, "limit": 5, "stream": True})
    assert isinstance(response, StreamingHttpResponse), response
    raw = b"".join(response.streaming_content).decode()
    events = {m.group(1): json.loads(m.group(2)) for m in re.finditer(r"^event: (\w+)\ndata: (.*)$", raw, re.M)}
    assert events["metadata"]["confidenceFactors"] == events["done"]["confidenceFactors"]
    assert events["done"]["confidenceFactors"]["supportingPassages"] >= 1


def test_supporting_counts_include_only_passages_the_asker_may_read(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    fake_llm.response = CITE_ALL
    by_user = {user: answer(api_for(user)) for user in (cast.alice, cast.bob, cast.charlie)}
    secret, theirs = str(corpus["secret"].pk), str(corpus["other_team"].pk)
    bob_documents = {c["document"]["id"] for c in by_user[cast.bob]["citations"]}
    assert secret not in bob_documents and theirs not in bob_documents
    assert by_user[cast.bob]["confidenceFactors"]["supportingDocuments"] <= len(bob_documents)
    alice_documents = {c["document"]["id"] for c in by_user[cast.alice]["citations"]}
    assert secret in alice_documents, "alice reads her private document: it supports her answer"
    assert (
        by_user[cast.alice]["confidenceFactors"]["supportingDocuments"]
        == by_user[cast.bob]["confidenceFactors"]["supportingDocuments"] + 1
    )
    # Her private document is a second supporting document: it raises her level, never bob's.
    assert (by_user[cast.alice]["confidence"], by_user[cast.bob]["confidence"]) == ("high", "medium")
    charlie = by_user[cast.charlie]
    assert {c["document"]["id"] for c in charlie["citations"]} == {theirs}
    assert charlie["confidenceFactors"]["supportingDocuments"] == 1


def test_an_old_cited_version_lowers_the_confidence_and_says_so(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_ANSWER_CACHE = False  # the same question twice; a cached answer keeps the factors it was made with
    fake_llm.response = "Owls hunt mice [1]."
    fresh = answer(api_for(cast.bob), documentId=str(corpus["owls"].pk))
    Document.objects.filter(pk=corpus["owls"].pk).update(updated_at=timezone.now() - timedelta(days=800))
    old = answer(api_for(cast.bob), documentId=str(corpus["owls"].pk))
    assert old["confidenceFactors"]["newestVersionAgeDays"] >= 800
    assert (fresh["confidence"], old["confidence"]) == ("medium", "low")
    assert "days old (over 365): one level down, low." in old["confidenceFactors"]["reasons"][-1]


def test_an_uncited_generated_answer_is_low_and_says_why(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    fake_llm.response = "Owls hunt mice."
    data = answer(api_for(cast.bob))
    assert data["confidence"] == "low"
    assert data["confidenceFactors"]["reasons"][-1].startswith("The generated answer cites no passage")


def test_insufficient_evidence_says_no_passage_reaches_the_threshold(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    data = api_for(cast.bob).post("rag.answer", {"query": "quantum chromodynamics lattice"}).json()["data"]
    assert data["confidence"] == "insufficient" and data["confidenceFactors"]["supportingPassages"] == 0
    assert data["confidenceFactors"]["reasons"][0].startswith("No passage")


def test_the_mcp_answer_tool_returns_the_same_factors(cast: Cast, corpus: dict[str, Document], fake_llm: FakeLLM) -> None:
    fake_llm.response = CITE_ALL
    result = tools.call("answer", caller=tools.Caller(user=cast.bob, can_write=True), arguments={"query": QUESTION, "limit": 5})[
        "data"
    ]
    assert result["confidenceFactors"]["supportingPassages"] >= 1 and result["confidenceFactors"]["reasons"]
