"""A citation points at the sentence it quotes: its PDF page, or its `path:start-end` lines, and a link that marks it."""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import StreamingHttpResponse

from documents.models import Document
from rag.mcp import tools
from tests.conftest import Api, ApiFor, Cast, SignIn
from tests.documents.ingestion.conftest import Upload
from tests.documents.ingestion.files import make_pdf

# Two pages of one chunk: the answer is on the second, so the chunk's first page is the wrong one.
TWO_PAGES = [
    ["Owls hunt small mammals in the meadow."],
    ["Barn owls nest in the hollow oak trees."],
]

NOTES = """# Field notes

Owls hunt small mammals in the meadow.
They fly without a sound.

## Nesting

Herons wade in shallow water.
Barn owls nest in the hollow oak trees.
"""


def answer(api: Api, query: str) -> dict[str, Any]:
    response = api.post("rag.answer", {"query": query, "limit": 3})
    assert response.status_code == 200, response.content
    return response.json()["data"]


def test_a_pdf_answer_on_page_two_is_cited_as_page_two(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"owls.pdf": make_pdf(TWO_PAGES)})
    data = answer(api_for(cast.alice), "Where do barn owls nest?")
    assert data["mode"] == "extractive"
    assert "Barn owls nest in the hollow oak trees. [1]" in data["answer"]
    citation = data["citations"][0]
    assert citation["start"] < Document.objects.get().text.index("Barn owls"), "the passage begins on page one"
    assert citation["page"] == 2
    assert citation["lines"] is None
    assert citation["location"] == "owls.pdf#page=2"


def test_a_markdown_citation_carries_the_lines_of_its_sentence(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"owls.md": NOTES.encode()})
    citation = answer(api_for(cast.alice), "Where do barn owls nest?")["citations"][0]
    text = Document.objects.get().text
    assert text[citation["quote"]["start"] : citation["quote"]["end"]] == "Barn owls nest in the hollow oak trees."
    assert citation["lines"] == {"start": 9, "end": 9}
    assert citation["location"] == "owls.md:9-9"
    assert citation["page"] is None


def test_the_mcp_answer_tool_cites_the_same_lines(cast: Cast, upload: Upload) -> None:
    upload(cast.alice, cast.handbook, {"owls.md": NOTES.encode()})
    caller = tools.Caller(user=cast.alice, can_write=True)
    citation = tools.call("answer", caller=caller, arguments={"query": "Where do barn owls nest?"})["data"]["citations"][0]
    assert (citation["lines"], citation["location"]) == ({"start": 9, "end": 9}, "owls.md:9-9")


def test_a_sentence_over_two_lines_is_cited_with_both(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"owls.md": NOTES.replace("hunt small mammals", "hunt small\nmammals").encode()})
    citation = answer(api_for(cast.alice), "What do owls hunt in the meadow?")["citations"][0]
    assert citation["lines"] == {"start": 3, "end": 4}
    assert citation["location"] == "owls.md:3-4"


def test_the_citation_link_opens_the_document_with_the_sentence_marked(
    cast: Cast, upload: Upload, api_for: ApiFor, signed_in: SignIn
) -> None:
    upload(cast.alice, cast.handbook, {"owls.md": NOTES.encode()})
    response = api_for(cast.alice).post("rag.answer", {"query": "Where do barn owls nest?", "stream": True})
    assert isinstance(response, StreamingHttpResponse)
    events = b"".join(response.streaming_content).decode()
    done = json.loads(next(b for b in events.split("\n\n") if b.startswith("event: done")).split("data: ", 1)[1])
    citation = done["citations"][0]
    href = re.search(r'<a class="cite" href="([^"]+)"', done["html"])
    assert href is not None
    link = href.group(1).replace("&amp;", "&")
    quote = citation["quote"]
    assert f"start={quote['start']}&end={quote['end']}" in link
    response = signed_in(cast.alice).get(link)
    assert response.status_code == 200
    page = response.content.decode()
    marked = re.search(r'<mark id="passage" class="passage">([^<]*)</mark>', page)
    assert marked is not None and marked.group(1) == "Barn owls nest in the hollow oak trees."
    assert "Cited at <code>owls.md:9-9</code>" in page
