"""Neighbouring context: a passage cut mid-thought is widened with the chunks beside it in its version.

A chunk ends where the chunker's token budget ran out. Most end at a sentence or a block, but a
sentence longer than a chunk, a code block, a table or a list split by lines, or a lead-in ending in
":" leave a passage cut mid-thought, and an answer built on half a sentence guesses the rest (or on a
table row without its header). Such a passage is
widened, before the prompt is built, with the text of its neighbouring chunks (at most
`RAG_ANSWER_NEIGHBOURS` on each side) of the same document version and section: just far enough to
complete the thought, or as far as the budget reaches when nothing nearer completes it. All the
widening of one answer adds at most `RAG_ANSWER_CONTEXT_TOKENS` tokens (counted with the chunker's
MiniLM tokenizer), spent on the best passage first. A neighbour that is itself a passage is not
added again, and widening never crosses a heading.

The added text is read in SQL from the document, through `Document.objects.visible_to(user)` and at
the passage's version, as the characters around the passage's span: consecutive chunks overlap
(`RAG_CHUNK_OVERLAP`) or leave whitespace between them, and reading the version's own text neither
repeats the overlap nor loses the whitespace. So a widened passage is still one exact span of that
version: `text == version_text[start:end]`.
"""

from __future__ import annotations

import bisect
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.db.models import Case, Q, Value, When
from django.db.models.functions import Substr

from documents.models import Document
from permissions.models import User
from rag.corpus.serving_model import fallback_model, serving_model
from rag.models import Chunk
from rag.providers.minilm import get_local_tokenizer


class Passage(Protocol):
    """What widening reads and changes of a passage (rag.answering.passages.Passage, which imports this module)."""

    n: int
    document_id: uuid.UUID
    version: int
    chunk_index: int
    start: int
    end: int
    text: str


# A sentence ends with a terminator, perhaps inside closing quotes, brackets or emphasis, before a space or the end.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]*_`]*(?=\s|\Z)")
_SENTENCE_END_AT_END = re.compile(_SENTENCE_END.pattern + r"\Z")
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})(.*)$", re.M)
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.M)
# Punctuation that continues a thought begun before it.
_CONTINUING = ",;:)]}"
# A list item or a table row: one of several lines that belong together.
_BLOCK_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])[ \t]|\|")
# A blank line after a text (at the start of what follows it), or before one: the end of a block.
_BLANK_LINE_FIRST = re.compile(r"[ \t]*\n[ \t]*\n")
_BLANK_LINE_LAST = re.compile(r"\n[ \t]*\n[ \t]*\Z")


def _cut_code_block(text: str) -> str | None:
    """Which end of `text` cuts a code block: "end", "start", or None when its fences pair up.

    With one fence too many, the first one opens a block that runs on past the end when it names a
    language, starts the text, or follows a lead-in ending in ":"; otherwise it closes a block that
    began before the text. (A heuristic: a bare fence alone cannot say which it is.)
    """
    fences = list(_FENCE.finditer(text))
    if len(fences) % 2 == 0:
        return None
    lead = text[: fences[0].start()].rstrip()
    opens = bool(fences[0].group(1).strip()) or not lead or lead.endswith(":")
    return "end" if opens else "start"


def ends_mid_thought(text: str, following: str | None = None) -> bool:
    """Whether `text` stops before its thought does: inside a code block, after a lead-in (":"), or
    neither at a sentence end nor at the end of its block (`following`, the text after it, when known,
    starts with a blank line: a list, a table or a line without a full stop may end there)."""
    stripped = text.strip()
    if not stripped:
        return False
    if _cut_code_block(stripped) == "end":
        return True
    if _FENCE.fullmatch(stripped.rsplit("\n", 1)[-1]) or _SENTENCE_END_AT_END.search(stripped):
        return False  # a code block closes here, or a sentence ends
    if stripped.endswith(":"):
        return True
    return following is None or _BLANK_LINE_FIRST.match(following) is None


def starts_mid_thought(text: str, preceding: str | None = None) -> bool:
    """Whether `text` begins inside a thought: inside a code block, or, unless it starts a block
    (`preceding`, the text before it, when known, ends with a blank line), with a lower-case word,
    continuing punctuation, or a list item or table row whose list or table began before it."""
    stripped = text.strip()
    if not stripped:
        return False
    if _cut_code_block(stripped) == "start":
        return True
    if preceding is not None and _BLANK_LINE_LAST.search(preceding):
        return False
    return stripped[0].islower() or stripped[0] in _CONTINUING or _BLOCK_ITEM.match(stripped) is not None


def _end_points(after: str) -> Iterator[int]:
    """Places in `after` where a widened passage may end: after a sentence, after a line, at its end."""
    points = {m.end() for m in _SENTENCE_END.finditer(after)}
    points.update(m.start() for m in re.finditer(r"\n", after))
    points.add(len(after))
    for point in sorted(points):
        if after[:point].strip():
            yield len(after[:point].rstrip())


def _start_points(before: str) -> Iterator[int]:
    """Places in `before` where a widened passage may start, nearest first: a sentence, a line, its start."""
    points = {m.end() for m in _SENTENCE_END.finditer(before)}
    points.update(m.end() for m in re.finditer(r"\n", before))
    points.add(0)
    for point in sorted(points, reverse=True):
        rest = before[point:]
        if rest.strip():
            yield point + len(rest) - len(rest.lstrip())


class _Tokens:
    """Token counts of any prefix or suffix of one text, from one pass of the tokenizer."""

    def __init__(self, text: str) -> None:
        offsets = get_local_tokenizer().encode(text, add_special_tokens=False).offsets
        self.starts = [start for start, _ in offsets]
        self.ends = [end for _, end in offsets]

    def before(self, position: int) -> int:
        return bisect.bisect_left(self.starts, position)

    def after(self, position: int) -> int:
        return len(self.ends) - bisect.bisect_right(self.ends, position)


def in_section(before: str, after: str) -> tuple[str, str]:
    """The parts of the text around a passage that are in its section: a heading ends the section (even
    one of the same name, which the chunks' heading paths cannot tell apart) and the one before it starts it."""
    heading = _HEADING.search(after)
    if heading is not None:
        after = after[: heading.start()]
    headings = list(_HEADING.finditer(before))
    if headings:
        before = before[headings[-1].start() :]
    return before, after


def widen_after(text: str, after: str, budget: int) -> tuple[int, int]:
    """How many characters of `after` complete `text`'s thought within `budget` tokens, and their tokens."""
    if not after or budget <= 0 or not ends_mid_thought(text, after):
        return 0, 0
    tokens = _Tokens(after)
    best = 0
    for point in _end_points(after):
        if tokens.before(point) > budget:
            break
        best = point
        # Past the last point what follows is not known (the reach ends there): it cannot end a block.
        if not ends_mid_thought(text + after[:point], after[point:] or None):
            break
    return best, tokens.before(best)


def widen_before(text: str, before: str, budget: int) -> tuple[int, int]:
    """How many characters at the end of `before` complete `text`'s thought within `budget` tokens, and their tokens."""
    if not before or budget <= 0 or not starts_mid_thought(text, before):
        return 0, 0
    tokens = _Tokens(before)
    best = len(before)
    for point in _start_points(before):
        if tokens.after(point) > budget:
            break
        best = point
        if not starts_mid_thought(before[point:] + text, before[:point] or None):
            break
    return len(before) - best, tokens.after(best)


@dataclass
class _Reach:
    """How far a passage may be widened: the offsets of its farthest usable neighbours."""

    passage: Passage
    low: int
    high: int


def _searched_models(user: User) -> list[str]:
    fallback = fallback_model()
    return [serving_model(user.team_id).model_id, *([fallback.model_id] if fallback else [])]


def _reaches(user: User, passages: Sequence[Passage], neighbours: int) -> list[_Reach]:
    """For each cut passage, the span its neighbouring chunks of the same version and section cover."""
    cut = [p for p in passages if starts_mid_thought(p.text) or ends_mid_thought(p.text)]
    if not cut:
        return []
    near = Q()
    for p in cut:
        near |= Q(
            document_id=p.document_id,
            document_version=p.version,
            chunk_index__range=(p.chunk_index - neighbours, p.chunk_index + neighbours),
        )
    rows = (
        # The chunks of the model the team is searched with: during a model switch, the configured one may have none yet;
        # and the fallback model's, whose chunks some documents have instead while the configured model fails.
        Chunk.objects.filter(near, model_id__in=_searched_models(user), document__in=Document.objects.visible_to(user))
        .values_list("document_id", "chunk_index", "start_offset", "end_offset", "metadata__heading_path")
        .order_by()
    )
    chunks = {(d, i): (start, end, path) for d, i, start, end, path in rows}
    taken = {(p.document_id, p.chunk_index) for p in passages}
    reaches = []
    for p in cut:
        own = chunks.get((p.document_id, p.chunk_index))
        if own is None:
            continue
        low, high = p.start, p.end
        for step, side in ((-1, "low"), (1, "high")):
            for k in range(1, neighbours + 1):
                key = (p.document_id, p.chunk_index + step * k)
                if key in taken or key not in chunks or chunks[key][2] != own[2]:
                    break  # already a passage, no such chunk, or another section
                if side == "low":
                    low = min(low, chunks[key][0])
                else:
                    high = max(high, chunks[key][1])
        if low < p.start or high > p.end:
            reaches.append(_Reach(p, low, high))
    return reaches


def _surroundings(user: User, reaches: list[_Reach]) -> dict[int, tuple[str, str]]:
    """The version text before and after each passage, up to its reach, in one query."""
    spans = {}
    for reach in reaches:
        p = reach.passage
        # Only the passage's own document at the passage's version: a newer version's text is not the cited one.
        here = Q(pk=p.document_id, version=p.version)
        # SQL substrings count characters from 1, as Python's offsets count them from 0.
        spans[f"before_{p.n}"] = Case(When(here, then=Substr("text", reach.low + 1, p.start - reach.low)), default=Value(""))
        spans[f"after_{p.n}"] = Case(When(here, then=Substr("text", p.end + 1, reach.high - p.end)), default=Value(""))
    if not spans:
        return {}
    rows = (
        Document.objects.visible_to(user).filter(pk__in={r.passage.document_id for r in reaches}).values("pk", "version", **spans)
    )
    texts: dict[int, tuple[str, str]] = {}
    for row in rows:
        for reach in reaches:
            p = reach.passage
            # A document gone from view, or at a newer version since the passage was ranked, has no row here: not widened.
            if (p.document_id, p.version) == (row["pk"], row["version"]):
                texts[p.n] = (row[f"before_{p.n}"], row[f"after_{p.n}"])
    return texts


def widen_passages(*, user: User, passages: Sequence[Passage]) -> None:
    """Widen, in place, the passages cut mid-thought with their neighbouring chunks' text (see the module docstring)."""
    neighbours, budget = settings.RAG_ANSWER_NEIGHBOURS, settings.RAG_ANSWER_CONTEXT_TOKENS
    if not neighbours or not budget:
        return
    reaches = _reaches(user, passages, neighbours)
    surroundings = _surroundings(user, reaches)
    for reach in reaches:  # passages come best first
        if budget <= 0:
            break
        p = reach.passage
        if p.n not in surroundings:
            continue
        before, after = surroundings[p.n]
        before, after = in_section(before, after)
        added_after, spent = widen_after(p.text, after, budget)
        budget -= spent
        text = p.text + after[:added_after]
        added_before, spent = widen_before(text, before, budget)
        budget -= spent
        p.text = before[len(before) - added_before :] + text
        p.start -= added_before
        p.end += added_after
