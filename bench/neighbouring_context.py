"""How often chunks are cut mid-thought, and how often neighbouring context completes them.

Chunks markdown files with the indexing pipeline's chunker at the configured sizes (RAG_CHUNK_SIZE,
RAG_CHUNK_OVERLAP, capped at the local model's input as indexing caps it) and, for every chunk with a
neighbour in its own section, asks what an answer would: is it cut at its end or its start, and does
widening within RAG_ANSWER_CONTEXT_TOKENS (one chunk on each side) complete the thought? No database:
the neighbours are the chunker's own, the text around them the file's.

Data: the markdown files given, by default this repository's README.md and docs/*.md.
Takes: seconds.

Reproduce:  .venv/bin/python bench/neighbouring_context.py [FILE ...]
            .venv/bin/python bench/neighbouring_context.py README.md docs/*.md ../shared/DESIGN.md ../shared/STYLE.md ../shared/seeds/*.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from rag.answering.context import (  # noqa: E402
    ends_mid_thought,
    in_section,
    starts_mid_thought,
    widen_after,
    widen_before,
)
from rag.indexing.chunking import chunk_markdown, minilm_token_counter  # noqa: E402
from rag.indexing.pipeline import HEADING_CONTEXT_TOKENS, SPECIAL_TOKENS  # noqa: E402
from rag.providers.local import MAX_SEQ_LENGTH  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: README.md and docs/*.md)")
    args = parser.parse_args()
    files = args.files or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    budget = settings.RAG_ANSWER_CONTEXT_TOKENS
    chunks = 0
    ends = {"cut": 0, "widened": 0, "completed": 0}
    starts = {"cut": 0, "widened": 0, "completed": 0}
    added: list[int] = []
    for path in files:
        text = path.read_text()
        cut = chunk_markdown(
            text,
            counter=minilm_token_counter(),
            chunk_size=settings.RAG_CHUNK_SIZE,
            overlap=settings.RAG_CHUNK_OVERLAP,
            max_tokens=MAX_SEQ_LENGTH - SPECIAL_TOKENS - HEADING_CONTEXT_TOKENS,
        )
        chunks += len(cut)
        for i, chunk in enumerate(cut):
            following = cut[i + 1] if i + 1 < len(cut) and cut[i + 1].heading_path == chunk.heading_path else None
            preceding = cut[i - 1] if i > 0 and cut[i - 1].heading_path == chunk.heading_path else None
            if following is not None:
                _, after = in_section("", text[chunk.end : following.end])
                if ends_mid_thought(chunk.text, after):
                    ends["cut"] += 1
                    length, tokens = widen_after(chunk.text, after, budget)
                    if length:
                        ends["widened"] += 1
                        added.append(tokens)
                        ends["completed"] += not ends_mid_thought(chunk.text + after[:length], after[length:] or None)
            if preceding is not None:
                before, _ = in_section(text[preceding.start : chunk.start], "")
                if starts_mid_thought(chunk.text, before):
                    starts["cut"] += 1
                    length, tokens = widen_before(chunk.text, before, budget)
                    if length:
                        starts["widened"] += 1
                        added.append(tokens)
                        cut_at = len(before) - length
                        starts["completed"] += not starts_mid_thought(before[cut_at:] + chunk.text, before[:cut_at] or None)
    print(
        f"{len(files)} files, {chunks} chunks (RAG_CHUNK_SIZE {settings.RAG_CHUNK_SIZE}, overlap "
        f"{settings.RAG_CHUNK_OVERLAP}), budget {budget} tokens"
    )
    print(
        f"cut at the end, with a next chunk in the section: {ends['cut']}; widened {ends['widened']}, completed {ends['completed']}"
    )
    print(
        f"cut at the start, with a chunk before in the section: {starts['cut']}; widened {starts['widened']}, completed {starts['completed']}"
    )
    if added:
        print(f"tokens added per widened side: median {statistics.median(added):g}, max {max(added)}")


if __name__ == "__main__":
    main()
