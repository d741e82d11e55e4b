"""What rag.* shows a client counts no other team's rows, and the inputs that made no sense are refused."""

from __future__ import annotations

import re
import uuid

from documents.models import Document
from rag.models import Chunk, Feedback
from rag.providers.fakes import FakeLLM
from tests.conftest import ApiFor, Cast
from tests.factories import CollectionFactory, DocumentFactory
from tests.rag.api.test_answer_api import ask
from tests.rag.texts import OWLS


def test_a_search_hit_id_is_its_document_version_and_place_not_the_global_chunk_sequence(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    hits = api_for(cast.bob).post("rag.search", {"query": "owls hunt", "mode": "keyword"}).json()["data"]
    assert hits
    for hit in hits:
        assert hit["id"] == f"{hit['document']['id']}:1:{hit['chunkIndex']}"
    sequence_numbers = {str(pk) for pk in Chunk.objects.values_list("pk", flat=True)}
    assert not sequence_numbers & {hit["id"] for hit in hits}


def test_another_teams_new_chunks_change_nothing_a_user_sees(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    from rag.indexing.pipeline import index_documents

    bob = api_for(cast.bob)
    before = bob.post("rag.search", {"query": "owls hunt", "mode": "keyword"}).json()
    theirs = DocumentFactory.create(
        collection=CollectionFactory.create(team=cast.charlie.team), created_by=cast.charlie, text=OWLS * 5
    )
    index_documents(document_ids=[theirs.pk])
    after = bob.post("rag.search", {"query": "owls hunt", "mode": "keyword"}).json()
    assert [h["id"] for h in after["data"]] == [h["id"] for h in before["data"]]


def test_feedback_ids_are_uuids(cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM) -> None:
    bob = api_for(cast.bob)
    answer_id = ask(bob).json()["data"]["id"]
    feedback = bob.post("rag.feedback", {"answerId": answer_id, "rating": 4}).json()["data"]
    assert uuid.UUID(feedback["id"]) and not re.fullmatch(r"\d+", feedback["id"])


def test_rating_an_answer_again_updates_the_one_rating(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], fake_llm: FakeLLM
) -> None:
    bob = api_for(cast.bob)
    answer_id = ask(bob).json()["data"]["id"]
    first = bob.post("rag.feedback", {"answerId": answer_id, "rating": 2, "comment": "vague"}).json()["data"]
    second = bob.post("rag.feedback", {"answerId": answer_id, "rating": 5, "comment": "actually right"}).json()["data"]
    assert second["id"] == first["id"]
    assert list(Feedback.objects.values_list("rating", "comment")) == [(5, "actually right")]


def test_weights_that_are_all_zero_are_refused(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    response = api_for(cast.bob).post("rag.search", {"query": "owls hunt", "weights": [0, 0]})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_query",
        "message": "weights: must not all be zero (every score would be 0, in no useful order).",
    }
    assert api_for(cast.bob).post("rag.search", {"query": "owls hunt", "weights": [0, 1]}).status_code == 200


def test_search_pagination_counts_the_results_it_holds(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    body = api_for(cast.bob).post("rag.search", {"query": "owls hunt", "limit": 1}).json()
    assert body["pagination"] == {"limit": 1, "count": len(body["data"])}


def test_a_reader_cannot_force_a_reindex_of_a_document_they_only_read(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document]
) -> None:
    owls = corpus["owls"]
    response = api_for(cast.bob).post("rag.embed", {"documentId": str(owls.id)})
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert api_for(cast.alice).post("rag.embed", {"documentId": str(owls.id)}).status_code == 200
