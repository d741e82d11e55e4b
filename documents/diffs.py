"""Line diffs between two versions of a document's text, for the history pages (rendered by templates, so escaped)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

# Unchanged lines shown around each change; longer unchanged runs are folded into one `skip` line.
CONTEXT_LINES = 3


@dataclass(frozen=True)
class DiffLine:
    kind: Literal["added", "removed", "same", "skip"]
    text: str
    old: int | None = None  # 1-based line numbers; None on the side the line is not on
    new: int | None = None


@dataclass(frozen=True)
class TextDiff:
    lines: list[DiffLine]
    added: int
    removed: int


def text_diff(old: str, new: str) -> TextDiff:
    """The lines of `new` that `old` lacks and the reverse, each change with a few unchanged lines around it."""
    a, b = old.splitlines(), new.splitlines()
    # No autojunk: it treats lines frequent in a long text (blank ones) as noise and aligns the rest oddly.
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    lines: list[DiffLine] = []
    added = removed = shown = 0  # `shown`: the old text's lines up to here are shown or folded
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        lines.extend(_skip(group[0][1] - shown))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(DiffLine("same", a[i], old=i + 1, new=j1 + (i - i1) + 1) for i in range(i1, i2))
                continue
            lines.extend(DiffLine("removed", a[i], old=i + 1) for i in range(i1, i2))
            lines.extend(DiffLine("added", b[j], new=j + 1) for j in range(j1, j2))
            removed += i2 - i1
            added += j2 - j1
        shown = group[-1][2]
    if added or removed:
        lines.extend(_skip(len(a) - shown))
    return TextDiff(lines=lines, added=added, removed=removed)


def _skip(count: int) -> list[DiffLine]:
    return [DiffLine("skip", f"{count} unchanged line{'' if count == 1 else 's'}")] if count > 0 else []
