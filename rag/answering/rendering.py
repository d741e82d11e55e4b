"""Answer text to safe HTML for the /rag page.

Markdown with raw HTML, images, links and link definitions all disabled (documents.rendering, which
document pages share): nothing a document or the LLM writes can become markup, a script, a remote
request or a clickable URL. The only links in the output are the citation links this module adds
for the `[n]` the server supplied.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from django.utils.html import escape

from documents.rendering import answer_markdown

_MARKER = re.compile(r"\[(\d{1,4})\]")


def passage_href(*, document_url: str, version: int, start: int, end: int) -> str:
    """The document page with the cited passage highlighted."""
    return f"{document_url}?{urlencode({'v': version, 'start': start, 'end': end})}#passage"


def answer_html(text: str, citations: dict[int, dict]) -> str:
    """Render `text`; each `[n]` with an entry in `citations` becomes a link to its passage."""
    html = answer_markdown().render(text)

    def link(match: re.Match) -> str:
        citation = citations.get(int(match.group(1)))
        if citation is None:
            return match.group(0)
        # The quoted sentence, where the citation has one (answers cached or logged before quotes were cited have not).
        span = citation.get("quote") or citation
        href = passage_href(
            document_url=citation["document"]["url"], version=citation["version"], start=span["start"], end=span["end"]
        )
        return (
            f'<a class="cite" href="{escape(href)}" data-n="{citation["n"]}" '
            f'title="{escape(citation["document"]["title"])}">[{citation["n"]}]</a>'
        )

    return _MARKER.sub(link, html)
