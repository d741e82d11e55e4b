"""Where text breaks into sentences: the answers' quotes (rag.answering.extractive) and the graph's stated relations
(rag.indexing.sentence_facts) read the same sentences."""

from __future__ import annotations

import re

# A stop that ends no sentence: an initial ("J. Smith", "M. K. Muthu", "U.S."), "c." for circa, a title or a
# common abbreviation ("St. Louis", "Dr. Who", "Inc."). Each width is its own look-behind (Python's are fixed).
_NOT_AN_END = (
    r"(?<!\b[A-Z]\.)"
    r"(?<!\bc\.)"
    r"(?<!\b(?:Mr|Ms|Dr|St|Jr|Sr|Mt|Co|ca|cf|vs)\.)"
    r"(?<!\b(?:Mrs|Gen|Col|Rev|Inc|Ltd|Fig|Vol|Sgt|Gov|Sen)\.)"
    r"(?<!\b(?:Prof|Capt|Corp)\.)"
)
# A sentence ends at . ! or ? and the blanks after it, at a blank line, and before a heading, list item or table row.
SENTENCE_END = re.compile(rf"(?<=[.!?]){_NOT_AN_END}\s+|\n\s*\n|\n(?=\s*(?:#|[-*+] |\d+[.)] |\|))")


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped, blank ones left out."""
    return [piece for part in SENTENCE_END.split(text) if (piece := part.strip())]
