"""Markdown to safe HTML, for document pages here and for answers in rag (which adds its citation links).

Raw HTML is never markup: it is shown as text, so a document's `<script>` cannot run (the strict
CSP in config/csp.py backs this up). Images never load, since a remote image is a tracker: answers
drop the syntax, document pages show the image's description instead. Link reference definitions
are off. Answers have no links at all (a model could write one); a document's own links are kept
when they are http(s), mailto or relative, and marked nofollow, noopener and noreferrer.

Documents also get pipe tables (as the HTML and DOCX importers write them), their column alignment
as a class: the pages' CSP allows no style attribute.
"""

from __future__ import annotations

import re
from functools import cache
from urllib.parse import quote

from django.utils.html import escape
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

_SAFE_URL = re.compile(r"(?:https?:|mailto:|[^:]*$)", re.I)
# Where the cited passage starts and ends, carried through the Markdown parser in the text itself;
# private-use characters, removed from the document first so the text cannot forge them.
_START, _END = "\ue000", "\ue001"
_TAG = re.compile(r"(<[^>]*>)")
# A line's block syntax: a marker placed before it would turn a heading or list item into a paragraph.
_BLOCK_MARK = re.compile(r"[ \t]{0,3}(?:#{1,6}[ \t]+|[-*+][ \t]+|\d{1,9}[.)][ \t]+|>[ \t]?|(?:```|~~~)[^\n]*\n)")


@cache
def answer_markdown() -> MarkdownIt:
    """The renderer for answers: raw HTML, images, links and link definitions disabled."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable(["image", "link", "autolink", "html_inline", "html_block", "reference"])
    return md


def _image_as_text(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return f'<span class="image">[image: {escape(alt)}]</span>' if alt else '<span class="image">[image]</span>'


_ALIGN = re.compile(r"text-align:(left|center|right)")


def _cell_open(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    if (style := token.attrGet("style")) is not None:
        token.attrs.pop("style", None)
        if align := _ALIGN.fullmatch(str(style)):
            token.attrSet("class", f"align-{align[1]}")
    return self.renderToken(tokens, idx, options, env)


def _link_open(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


_WIKI_LINK = re.compile(r"\[\[([^\[\]\n|]{1,200})(?:\|([^\[\]\n]{1,200}))?\]\]")


def _wiki_link(state: StateInline, silent: bool) -> bool:
    """`[[Title]]` and `[[Title|label]]` (Obsidian, Notion and Confluence sources write them) link to the document
    of that title the reader may see (documents.pages.document_by_title), or to nothing they may not."""
    if not state.src.startswith("[[", state.pos):
        return False
    match = _WIKI_LINK.match(state.src, state.pos)
    if match is None:
        return False
    if not silent:
        title = match.group(1).strip()
        link = state.push("link_open", "a", 1)
        link.attrs = {"href": f"/doc/title/{quote(title, safe='')}", "class": "wiki"}
        text = state.push("text", "", 0)
        text.content = (match.group(2) or title).strip()
        state.push("link_close", "a", -1)
    state.pos = match.end()
    return True


@cache
def document_markdown() -> MarkdownIt:
    """The renderer for document pages: raw HTML and link definitions disabled, images as text, safe links only, tables."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable(["html_inline", "html_block", "reference"])
    md.enable("table")
    default_validate = md.validateLink
    md.validateLink = lambda url: bool(default_validate(url) and _SAFE_URL.match(url.strip()))  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("link_open", _link_open)
    md.inline.ruler.before("link", "wiki_link", _wiki_link)
    md.add_render_rule("th_open", _cell_open)
    md.add_render_rule("td_open", _cell_open)
    return md


def _block_mark(text: str, offset: int) -> re.Match | None:
    """The block mark of the line `offset` is on, if `offset` falls inside or right after it."""
    line = text.rfind("\n", 0, offset) + 1
    mark = _BLOCK_MARK.match(text, line)
    return mark if mark and offset <= mark.end() else None


def _passage_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The passage without surrounding blank space, and with its ends moved off block marks (a marker there breaks the block)."""
    while start < end and text[start].isspace():
        start += 1
    if mark := _block_mark(text, start):
        start = mark.end()
    while end > start and text[end - 1].isspace():
        end -= 1
    if (mark := _block_mark(text, end)) and mark.start() > start:
        end = mark.start()
        while end > start and text[end - 1].isspace():
            end -= 1
    return start, max(start, end)


def title_heading_end(text: str, title: str) -> int:
    """Where the text goes on after its opening H1 when that heading repeats `title` (0 when it does not).

    Imported files and documents written as Markdown usually open with their title; the page shows
    the title once, above the text. The heading is compared as it reads (no markup, spacing or case).
    """
    tokens = document_markdown().parse(text[:2_000])  # the opening heading is within the first lines
    if len(tokens) < 3 or tokens[0].type != "heading_open" or tokens[0].tag != "h1" or tokens[0].map is None:
        return 0
    md = document_markdown()
    assert isinstance(md.renderer, RendererHTML), "document_markdown renders HTML"
    heading = md.renderer.renderInlineAsText(tokens[1].children or [], md.options, {})
    if " ".join(heading.split()).casefold() != " ".join(title.split()).casefold():
        return 0
    end = 0
    for _ in range(tokens[0].map[1]):  # the heading's lines: one for `# Title`, two for a setext `Title\n===`
        end = text.find("\n", end) + 1
        if end == 0:
            return len(text)
    return end


def document_html(text: str, *, highlight: tuple[int, int] | None = None, title: str | None = None) -> str:
    """A document's Markdown as safe HTML; characters `highlight` spans (offsets into `text`) in `<mark>`s.

    The marks wrap text only, never tags, so a passage spanning paragraphs, list items or a code
    block is marked piece by piece; the first piece has the id `passage` a citation link scrolls to.
    With `title`, an opening H1 repeating it is left out (see title_heading_end); a highlight
    starting in it starts after it.
    """
    if title is not None and (cut := title_heading_end(text, title)):
        text = text[cut:]
        if highlight is not None:
            highlight = (max(0, highlight[0] - cut), max(0, highlight[1] - cut))
            if highlight[0] >= highlight[1]:
                highlight = None
    if highlight is None:
        return document_markdown().render(_unmarked(text))
    start, end = _passage_bounds(text, *highlight)
    source = _unmarked(text[:start]) + _START + _unmarked(text[start:end]) + _END + _unmarked(text[end:])
    out: list[str] = []
    inside = anchored = False
    for part in _TAG.split(document_markdown().render(source)):
        if part.startswith("<"):
            # A marker the parser moved into an attribute (a passage starting inside a link's URL) still counts.
            inside = (inside or _START in part) and _END not in part
            out.append(_unmarked(part))
            continue
        for piece in re.split(f"([{_START}{_END}])", part):
            if piece in (_START, _END):
                inside = piece == _START
            elif inside and piece.strip():
                # The first marked piece carries the anchor a citation link scrolls to.
                anchor = "" if anchored else ' id="passage"'
                out.append(f'<mark{anchor} class="passage">{piece}</mark>')
                anchored = True
            else:
                out.append(piece)
    return "".join(out)


def _unmarked(text: str) -> str:
    return text.replace(_START, "").replace(_END, "")
