"""Answers without an LLM: the sentence of each top passage that best answers the question, quoted and cited."""

from __future__ import annotations

import re

from rag.answering.citations import CITATION
from rag.answering.passages import Passage

INSUFFICIENT_ANSWER = "There is not enough information in the documents you can read to answer this question."
EXTRACTIVE_INTRO = "From your documents:"
EXTRACTIVE_PASSAGES = 3

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:#|[-*+] |\d+\. ))")
_MARKUP = [
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links keep their text
    (re.compile(r"<[^>]*>"), ""),  # HTML tags
    (re.compile(r"^\s{0,3}(?:#{1,6}\s+|[-*+]\s+|>\s?)", re.M), ""),  # heading, list and quote marks
    (re.compile(r"^\s*(?:```|~~~)[\w+-]*[ \t]*$", re.M), ""),  # code fences and their language tag
    (re.compile(r"[`*_]{1,3}"), ""),
]
_HEADING = re.compile(r"\s{0,3}#{1,6}\s")
_SUFFIXES = ("ments", "ment", "ings", "ing", "ions", "ion", "ed", "es", "s")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it of on or should the to was we what when where which who why will with you your".split()
)


def _plain(sentence: str) -> str:
    for pattern, replacement in _MARKUP:
        sentence = pattern.sub(replacement, sentence)
    sentence = CITATION.sub("", sentence)  # a document's own "[3]" must not read as our citation
    return " ".join(sentence.split())


def _stem(word: str) -> str:
    """A light suffix strip, so "deploying" and "deployment" meet at "deploy"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _shared_terms(wanted: set[str], sentence: str) -> int:
    """How many of the question's terms the sentence has; a compound counts ("rollback" has "roll")."""
    terms = _terms(sentence)
    return sum(any(t == w or (len(w) >= 4 and t.startswith(w)) for t in terms) for w in wanted)


def extractive_answer(query: str, passages: list[Passage], *, count: int = EXTRACTIVE_PASSAGES) -> str:
    """An answer without an LLM: from each of the top passages, the sentence sharing most terms with the question, cited."""
    wanted = _terms(query)
    lines = []
    for passage in passages[:count]:
        # Headings name a topic; they answer nothing.
        pieces = [s for s in _SENTENCE_END.split(passage.text) if not _HEADING.match(s)]
        sentences = [s for s in map(_plain, pieces) if len(_WORD.findall(s)) >= 3]
        if not sentences:
            continue
        best = max(sentences, key=lambda s: (_shared_terms(wanted, s), -sentences.index(s)))
        lines.append(f"- {best} [{passage.n}]")
    if not lines:
        return INSUFFICIENT_ANSWER
    return EXTRACTIVE_INTRO + "\n\n" + "\n".join(lines)
