"""A deleted collection's documents leave search and answers at once, and their passages leave the index."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from documents.models import Document
from rag.models import Chunk
from tests.conftest import ApiFor, Cast

CaptureOnCommit = Callable[..., AbstractContextManager[list[Callable[[], None]]]]


def hit_titles(api_for: ApiFor, cast: Cast, mode: str) -> set[str]:
    body = api_for(cast.alice).post("rag.search", {"query": "owls hunt mice", "mode": mode, "threshold": 0}).json()
    return {hit["document"]["title"] for hit in body["data"]}


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_a_confirmed_collection_delete_takes_its_documents_out_of_search(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], mode: str
) -> None:
    assert "Owls" in hit_titles(api_for, cast, mode)
    response = api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})
    assert response.status_code == 200, response.content
    assert hit_titles(api_for, cast, mode) == {"Secret owls"}


def test_the_deleted_documents_passages_leave_the_index_once_the_delete_commits(
    cast: Cast, api_for: ApiFor, corpus: dict[str, Document], django_capture_on_commit_callbacks: CaptureOnCommit
) -> None:
    handbook = [corpus["owls"].pk, corpus["volcano"].pk]
    assert Chunk.objects.filter(document_id__in=handbook).exists()
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})
    assert not Chunk.objects.filter(document_id__in=handbook).exists()
    assert Chunk.objects.filter(document_id=corpus["secret"].pk).exists()


def test_a_refused_delete_leaves_search_as_it_was(cast: Cast, api_for: ApiFor, corpus: dict[str, Document]) -> None:
    before = hit_titles(api_for, cast, "keyword")
    assert api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id)}).status_code == 409
    assert hit_titles(api_for, cast, "keyword") == before
