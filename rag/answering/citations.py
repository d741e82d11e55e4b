"""Citation markers in answer text: keep the `[n]` the server supplied, drop every other number.

Pure functions with no Django imports. `CitationFilter` does the same job on a stream of text pieces
and, however the text is split, produces exactly what `clean_citations` produces for the whole.
"""

from __future__ import annotations

import re

# `[1]`, `[2, 3]`, `[4; 5]`; numbers of at most four digits, at most ten per bracket, so a
# marker is bounded in length and a stream never holds back more than a few dozen characters.
_NUMBERS = r"\d{1,4}(?: ?[,;] ?\d{1,4}){0,9}"
CITATION = re.compile(r"([ \t]*)\[(" + _NUMBERS + r")\]")
# What may still grow into a marker at the end of a piece of a stream.
_OPEN_TAIL = re.compile(r"[ \t]*(?:\[[\d \t,;]{0,80})?\Z")


def _replace(match: re.Match, valid: set[int], cited: list[int]) -> str:
    numbers = [int(n) for n in re.findall(r"\d+", match.group(2))]
    kept = [n for n in dict.fromkeys(numbers) if n in valid]
    if not kept:
        return ""
    for n in kept:
        if n not in cited:
            cited.append(n)
    return match.group(1) + "".join(f"[{n}]" for n in kept)


def clean_citations(text: str, valid: set[int]) -> tuple[str, list[int]]:
    """`text` with markers rewritten as `[a][b]` of valid numbers only, and the cited numbers in order of appearance."""
    cited: list[int] = []
    return CITATION.sub(lambda m: _replace(m, valid, cited), text), cited


class CitationFilter:
    """Streaming `clean_citations`: feed pieces, get back the text that is safe to send and newly cited numbers."""

    def __init__(self, valid: set[int]) -> None:
        self.valid = valid
        self.cited: list[int] = []
        self._held = ""

    def feed(self, piece: str) -> tuple[str, list[int]]:
        text = self._held + piece
        tail = _OPEN_TAIL.search(text)
        cut = tail.start() if tail else len(text)
        self._held = text[cut:]
        return self._process(text[:cut])

    def flush(self) -> tuple[str, list[int]]:
        text, self._held = self._held, ""
        return self._process(text)

    def _process(self, text: str) -> tuple[str, list[int]]:
        before = len(self.cited)
        out = CITATION.sub(lambda m: _replace(m, self.valid, self.cited), text)
        return out, self.cited[before:]
