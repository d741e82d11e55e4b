"""Answers without an LLM: the sentence of each top passage that best answers the question, quoted and cited."""

from __future__ import annotations

import re
from collections.abc import Sequence

import snowballstemmer

from rag.answering.citations import CITATION
from rag.answering.passages import Fact, Passage
from rag.retrieval.names import entity_key, normalised_text

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
_STEMMER = snowballstemmer.stemmer("english")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it of on or should the to was we what when where which who why will with you your".split()
)


def _plain(sentence: str) -> str:
    for pattern, replacement in _MARKUP:
        sentence = pattern.sub(replacement, sentence)
    sentence = CITATION.sub("", sentence)  # a document's own "[3]" must not read as our citation
    return " ".join(sentence.split())


def _terms(text: str) -> set[str]:
    """The words that carry meaning, stemmed (Snowball), so "deploying" and "deployment" meet at "deploy"."""
    return set(_STEMMER.stemWords([w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]))


def _shared_terms(wanted: set[str], sentence: str) -> int:
    """How many of the question's terms the sentence has; a compound counts ("rollback" has "roll")."""
    terms = _terms(sentence)
    return sum(any(t == w or (len(w) >= 4 and t.startswith(w)) for t in terms) for w in wanted)


def _sentences(text: str) -> list[str]:
    # Headings name a topic; they answer nothing.
    pieces = [s for s in _SENTENCE_END.split(text) if not _HEADING.match(s)]
    return [s for s in map(_plain, pieces) if len(_WORD.findall(s)) >= 3]


def _naming(sentences: list[str], name: str) -> str | None:
    """The first sentence that names `name` (as the graph matched it: normalised, on word boundaries)."""
    key = entity_key(name)
    return next((s for s in sentences if key and f" {key} " in f" {normalised_text(s)} "), None)


def extractive_answer(
    query: str, passages: list[Passage], *, facts: Sequence[Fact] = (), count: int = EXTRACTIVE_PASSAGES
) -> str:
    """An answer without an LLM: from each of the top passages, the sentence sharing most terms with the question, cited.

    The chain is followed where the graph links the passages: when a quoted passage names the
    document another passage belongs to ("the director of X" is named in X's passage and answered
    in the director's), the sentence naming it is quoted too, and that passage comes next.
    """
    wanted = _terms(query)
    by_n = {p.n: p for p in passages}
    # Each passage leads to at most one other: the best-ranked passage whose document it names.
    leads: dict[int, tuple[str, int]] = {}
    for fact in sorted(facts, key=lambda f: f.target_n):
        if fact.n != fact.target_n and fact.n in by_n and fact.target_n in by_n:
            leads.setdefault(fact.n, (fact.target, fact.target_n))
    lines: list[str] = []
    visited: set[int] = set()

    def visit(n: int) -> None:
        visited.add(n)
        sentences = _sentences(by_n[n].text)
        if not sentences:
            return
        picked = {max(sentences, key=lambda s: (_shared_terms(wanted, s), -sentences.index(s)))}
        lead = leads.get(n)
        bridge = _naming(sentences, lead[0]) if lead else None
        if bridge:
            picked.add(bridge)
        lines.extend(f"- {s} [{n}]" for s in sorted(picked, key=sentences.index))
        if lead and bridge and lead[1] not in visited:
            visit(lead[1])

    for passage in passages[:count]:
        if passage.n not in visited:
            visit(passage.n)
    if not lines:
        return INSUFFICIENT_ANSWER
    return EXTRACTIVE_INTRO + "\n\n" + "\n".join(lines)
