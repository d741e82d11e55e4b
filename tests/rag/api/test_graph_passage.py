"""graph.passage: the passage a relation was read from, only from a document the caller may read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from documents.models import Document
from documents.services import document_archive, document_update
from rag.indexing.pipeline import index_documents
from tests.conftest import Api, ApiFor, Cast
from tests.factories import CollectionFactory, DocumentFactory

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse


@pytest.fixture
def docs(cast: Cast) -> dict[str, Document]:
    docs = {
        "film": DocumentFactory.create(
            collection=cast.handbook,
            created_by=cast.alice,
            title="The Organization (Film)",
            text="The Organization is a 1971 thriller directed by Don Medford.",
        ),
        "director": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Don Medford", text="He was an American film director."
        ),
        "memo": DocumentFactory.create(
            collection=cast.private, created_by=cast.alice, title="Secret Memo", text="Don Medford was also in a memo."
        ),
        "theirs": DocumentFactory.create(
            collection=CollectionFactory.create(team=cast.charlie.team),
            created_by=cast.charlie,
            title="Their Memo",
            text="Don Medford, seen from another team.",
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def passage(api: Api, chunk_id: object) -> _MonkeyPatchedResponse:
    return api.post("graph.passage", {"chunkId": chunk_id})


def test_it_returns_the_passage_a_relation_was_read_from_and_where_it_sits(
    cast: Cast, api_for: ApiFor, docs: dict[str, Document]
) -> None:
    bob = api_for(cast.bob)
    director = bob.post("graph.entities", {"query": "don medford"}).json()["data"][0]
    relation = next(
        n
        for n in bob.post("graph.entity", {"id": director["id"]}).json()["data"]["neighbours"]
        if n["entity"]["name"] == "The Organization (Film)"
    )
    response = passage(bob, relation["chunkId"])
    assert response.status_code == 200, response.json()
    data = response.json()["data"]
    film = docs["film"]
    assert data["chunkId"] == relation["chunkId"] == f"{film.pk}:1:0"
    assert (data["documentId"], data["title"], data["version"], data["chunkIndex"]) == (str(film.pk), film.title, 1, 0)
    assert "directed by Don Medford" in data["text"]
    assert "directed by Don Medford" in film.text[data["start"] : data["end"]]


def test_a_passage_of_a_document_the_caller_cannot_read_is_not_found(
    cast: Cast, api_for: ApiFor, docs: dict[str, Document]
) -> None:
    memo, theirs = f"{docs['memo'].pk}:1:0", f"{docs['theirs'].pk}:1:0"
    assert passage(api_for(cast.alice), memo).status_code == 200
    assert passage(api_for(cast.bob), memo).json() == {"error": "not_found", "message": "Passage not found."}
    assert passage(api_for(cast.charlie), f"{docs['film'].pk}:1:0").status_code == 404
    assert passage(api_for(cast.alice), theirs).status_code == 404
    assert passage(api_for(cast.charlie), theirs).status_code == 200


def test_a_passage_of_another_version_or_an_archived_document_is_not_found(
    cast: Cast, api_for: ApiFor, docs: dict[str, Document]
) -> None:
    alice, film = api_for(cast.alice), docs["film"]
    assert passage(alice, f"{film.pk}:1:1").status_code == 404, "no second chunk"
    document_update(document=film, text="A new cut of the film, directed by Don Medford.")
    index_documents(document_ids=[film.pk])
    assert passage(alice, f"{film.pk}:1:0").status_code == 404
    assert "A new cut" in passage(alice, f"{film.pk}:2:0").json()["data"]["text"]
    document_archive(document=film)
    assert passage(alice, f"{film.pk}:2:0").status_code == 404


@pytest.mark.parametrize(
    "chunk_id",
    ["", "owls", "1:2:3", "{doc}", "{doc}:1", "{doc}:one:0", "{doc}:1:0:0", "{doc}:-1:0", "{doc}:1:1234567890", 7, None],
)
def test_anything_but_a_passage_id_is_refused(cast: Cast, api_for: ApiFor, docs: dict[str, Document], chunk_id: object) -> None:
    if isinstance(chunk_id, str):
        chunk_id = chunk_id.format(doc=docs["film"].pk)
    response = passage(api_for(cast.alice), chunk_id)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_query"
