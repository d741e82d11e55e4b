"""A passage of an imported PDF is cited with the page of the sentence it quotes, in rag.answer and its stream."""

from __future__ import annotations

import json
from typing import Any

from django.http import StreamingHttpResponse
from pytest_django import DjangoCaptureOnCommitCallbacks

from documents.models import Document, Source
from tests.conftest import Api, ApiFor, Cast
from tests.documents.ingestion.conftest import Upload
from tests.documents.ingestion.files import make_pdf

# Three pages, each about one subject, long enough to be chunked apart.
PAGES = {
    1: "Barn owls hunt voles across open meadows at dusk.",
    2: "Glaciers carve deep valleys as the ice grinds slowly downhill.",
    3: "Volcanic eruptions spread ash over the surrounding farmland.",
}


def pdf() -> bytes:
    return make_pdf([[f"{sentence} Line {n} of page {page}." for n in range(40)] for page, sentence in PAGES.items()])


def answer(api: Api, query: str, **extra: object) -> dict[str, Any]:
    response = api.post("rag.answer", {"query": query, "limit": 3, **extra})
    assert response.status_code == 200, response.content
    return response.json()["data"]


def test_a_pdf_citation_carries_the_page_of_its_quote(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"nature.pdf": pdf()})
    document = Document.objects.get()
    source = Source.objects.get(document=document)
    assert source.page_count == 3
    citations = answer(api_for(cast.bob), "Where do glaciers carve deep valleys?")["citations"]
    assert citations, "the glacier passage is cited"
    for citation in citations:
        assert citation["page"] == source.page_of(citation["quote"]["start"])


def test_the_glacier_page_is_page_two(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"nature.pdf": pdf()})
    citations = answer(api_for(cast.alice), "Where do glaciers carve deep valleys?")["citations"]
    on_glacier_page = [
        c for c in citations if "Glaciers" in c["context"] and "owls" not in c["context"] and "Volcanic" not in c["context"]
    ]
    assert on_glacier_page and {c["page"] for c in on_glacier_page} == {2}


def test_a_streamed_citation_carries_the_page(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"nature.pdf": pdf()})
    response = api_for(cast.alice).post("rag.answer", {"query": "Where do volcanic eruptions spread ash?", "stream": True})
    assert isinstance(response, StreamingHttpResponse)
    events = b"".join(response.streaming_content).decode()
    citations = [json.loads(block.split("data: ", 1)[1]) for block in events.split("\n\n") if block.startswith("event: citation")]
    assert citations and all(isinstance(c["page"], int) for c in citations)


def test_a_citation_of_a_document_written_in_cairn_has_no_page(
    cast: Cast, api_for: ApiFor, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post(
            "documents.create",
            {"title": "Owls", "text": PAGES[1] * 5, "collectionId": str(cast.handbook.pk), "publish": True},
        )
    citations = answer(api_for(cast.alice), "Where do barn owls hunt voles?")["citations"]
    assert citations and {c["page"] for c in citations} == {None}


def test_an_edited_pdf_document_loses_its_pages(
    cast: Cast, upload: Upload, api_for: ApiFor, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    upload(cast.alice, cast.handbook, {"nature.pdf": pdf()})
    document = Document.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        api_for(cast.alice).post("documents.update", {"id": str(document.pk), "text": document.text + "\n\nAn edit."})
    citations = answer(api_for(cast.alice), "Where do glaciers carve deep valleys?")["citations"]
    assert citations and {(c["version"], c["page"]) for c in citations} == {(2, None)}
