"""Code documents: a source file's text stored as one fenced code block, its language the fence's info string.

A fence keeps a code document an ordinary Markdown document: the page renders it as a code block, the
editor, history, diffs and search read it as they read any text, and nothing else needs a format column.
The fence line is the text's line 1, so line N of the file is line N + 1 of the text: `code_line_shift`
is what citations subtract to name the file's own lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

# File suffixes read as code, and the language named in the fence. The first group is chunked by
# symbol (rag.indexing.code_chunking); the others are fenced and chunked by lines.
CODE_SUFFIXES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "jsx",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rs": "rust",
    ".rb": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".swift": "swift",
    ".scala": "scala",
    ".sh": "bash",
    ".bash": "bash",
    ".sql": "sql",
}

_OPENING = re.compile(r"(`{3,})([A-Za-z0-9_+#-]+)\n")


@dataclass(frozen=True)
class CodeBody:
    """Where a code document's file text sits inside its document text."""

    language: str
    start: int  # offset of the file's first character (after the opening fence line)
    end: int  # offset just past the file's last line (before the closing fence)


def code_language(name: str) -> str | None:
    """The language of a file named `name`, when Cairn reads it as code."""
    return CODE_SUFFIXES.get(PurePosixPath(name).suffix.lower())


def fence_code(text: str, language: str) -> str:
    """The file's text as one fenced block; the fence is longer than any backtick run in the code."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{language}\n{body}{fence}\n"


def code_body(text: str) -> CodeBody | None:
    """The code inside `text` when it opens with a fence naming a language and closes with that fence; else None."""
    opening = _OPENING.match(text)
    if opening is None:
        return None
    return _body(opening, text.rstrip("\n"))


def _body(opening: re.Match[str], stripped: str) -> CodeBody | None:
    fence = opening.group(1)
    end = len(stripped) - len(fence)
    if end < opening.end() or not stripped.endswith("\n" + fence):
        return None
    return CodeBody(language=opening.group(2).lower(), start=opening.end(), end=end)


def is_code_text(head: str, tail: str) -> bool:
    """`code_body(text) is not None`, read from the text's first and last characters only (as SQL returns them)."""
    opening = _OPENING.match(head)
    return opening is not None and tail.rstrip("\n").endswith("\n" + opening.group(1))


# How much of a text's ends `is_code_text` needs: a fence line with its language, and the closing fence.
CODE_HEAD = 64
CODE_TAIL = 64


def code_line_shift(text: str) -> int:
    """How many lines the text has above the file's first line: 1 for a code document, else 0."""
    return 1 if code_body(text) is not None else 0
