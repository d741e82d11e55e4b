"""Answers without an LLM: the sentences of the passages that answer the question, quoted and cited.

Every sentence of every passage is a candidate, and it is quoted only if it passes a relevance test
of its own. Lexically, it must hold enough of the question's content words, each weighted by how
rare it is among the candidates ("vacation" tells sentences apart, "days" hardly does). With the
local MiniLM model, that share is averaged with the sentence's cosine similarity to the question, so
a paraphrase ("ahead" for "in advance") is not missed for want of the same word. Nothing passes,
nothing is quoted: the answer says there is not enough information rather than pad with the best of
what is there. Text a reader never sees (`<style>`, `<script>`, HTML comments) is never quoted.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import snowballstemmer
from django.conf import settings
from django.core.cache import cache

from config.errors import EmbeddingUnavailable
from rag.answering import multihop
from rag.answering.answer_types import read_question
from rag.answering.citations import CITATION
from rag.answering.confidence import AnswerSupport
from rag.answering.passages import Fact, Passage
from rag.corpus.names import entity_key, normalised_text
from rag.corpus.sentences import SENTENCE_END
from rag.providers.embeddings import get_embedding_provider
from rag.providers.errors import ProviderError
from rag.retrieval.query import embed_query

logger = logging.getLogger("rag.answers")

INSUFFICIENT_ANSWER = "There is not enough information in the documents you can read to answer this question."
EXTRACTIVE_INTRO = "From your documents:"
# At most this many answers (a sentence, or a chain of sentences the graph connects) are quoted.
EXTRACTIVE_ANSWERS = 3
# A sentence answers when its score (see `Relevance`) reaches this ...
MIN_SCORE = 0.45
# ... and this share of the best sentence's, so a near miss is not quoted beside a hit. Both were
# chosen on tests/rag/answering/extractive_cases.py; see docs/benchmarks.md.
RELATIVE_SCORE = 0.85
# A word of the question that only the document's title or a heading above the sentence holds counts this much.
CONTEXT_WEIGHT = 0.5
# A chain (a sentence naming another passage's document, then that passage's answer) has at most this many hops.
MAX_HOPS = 3
# Sentence vectors are cached by model and text: a document's sentences are embedded once, not per question.
SENTENCE_CACHE_SECONDS = 7 * 24 * 3600

Similarity = Callable[[str, list[str]], "list[float] | None"]

_WORD = re.compile(r"\w+")
# What a browser never shows, removed with its content. A block may begin in the chunk before this
# one (a chunk can start inside a stylesheet) or end after it.
_HIDDEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<(script|style|template|noscript)\b[^>]*>.*?(?:</\1\s*>|\Z)|\A(?:(?!<(?:script|style)\b).)*?</(?:script|style)\s*>",
    re.I | re.S,
)
_MARKUP = [
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links keep their text
    (re.compile(r"<[^>]*>"), ""),  # HTML tags
    (re.compile(r"^\s{0,3}(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s?)", re.M), ""),  # heading, list and quote marks
    (re.compile(r"^\s*(?:```|~~~)[\w+-]*[ \t]*$", re.M), ""),  # code fences and their language tag
    (re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$", re.M), ""),  # a table's header rule
    (re.compile(r"^\s*\|\s*|\s*\|\s*$", re.M), ""),  # a table row's outer bars (the inner ones separate its cells)
    # Emphasis and inline code lose their marks, but only marks that wrap words: an identifier's underscores
    # (invoice_total, RAG_LLM_MODEL) and an operator's asterisk (sum(lines) * 1.08) are the text itself.
    (re.compile(r"`+([^`]+?)`+"), r"\1"),
    (re.compile(r"(?<![\w*])(\*{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])"), r"\2"),
    (re.compile(r"(?<![\w_])(_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w_])"), r"\2"),
]
_HEADING = re.compile(r"\s{0,3}(#{1,6})\s")
_STEMMER = snowballstemmer.stemmer("english")
# Words a question is phrased with rather than about.
STOPWORDS = frozenset(
    """a about am an and any are as at be been being by can could did do does for from get gets getting got has have
    having how i if in into is it its many may me might much must my need of on or our should so than that the their
    them then there these they this those to us was we were what when where which who whom why will with would you
    your""".split()
)


@dataclass(frozen=True)
class Sentence:
    n: int
    index: int
    text: str
    terms: frozenset[str]
    # The words of the document's title and of the headings above the sentence: what it is about.
    context: frozenset[str] = frozenset()
    # Where the sentence as written (markup and all) sits in its document version's text.
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class Extract:
    """An extractive answer, and the span of the first sentence it quotes from each passage, by passage number."""

    text: str
    quotes: dict[int, tuple[int, int]]
    # The answer span the lead states ("Oslo"), when a sentence on the question's path gives one.
    lead: str | None = None
    # How the answer was found: "path" (from the entity the question names, across the documents it
    # links to), "comparison" (each side's fact, compared), "comparison-facts" (both read, not
    # comparable), or "sentences" (the sentences most like the question).
    method: str = "sentences"
    # The hops of the path the lead rests on (1: the named document states it), 0 without a lead.
    hops: int = 0
    # The lead's sentence states the relation asked about; every role asked through is held by a bridge.
    relation_held: bool = False
    roles_held: bool = False
    # A quoted sentence is mostly the question's words repeated (keyword-stuffed text, not a statement).
    stuffed: bool = False

    def support(self) -> AnswerSupport:
        return AnswerSupport(
            method=self.method,
            lead=self.lead is not None,
            relation_held=self.relation_held,
            roles_held=self.roles_held,
            stuffed=self.stuffed,
        )


def _plain(sentence: str) -> str:
    for pattern, replacement in _MARKUP:
        sentence = pattern.sub(replacement, sentence)
    sentence = CITATION.sub("", sentence)  # a document's own "[3]" must not read as our citation
    return " ".join(sentence.split())


def _pieces(text: str) -> Iterator[tuple[str, int]]:
    """The sentences and blocks of `text`, each with the offset in `text` of its first character that is not blank.

    `<style>`, `<script>`, `<template>` and `<noscript>` blocks and HTML comments, content included,
    are never part of one: each stands as a space, and `shifts` maps offsets back across them.
    """
    visible, shifts, last = [], [(0, 0)], 0
    for match in _HIDDEN.finditer(text):
        visible.append(text[last : match.start()] + " ")
        last = match.end()
        shifts.append((sum(map(len, visible)), last))
    visible.append(text[last:])
    joined = "".join(visible)
    keys = [v for v, _ in shifts]

    def original(offset: int) -> int:
        v, o = shifts[bisect_right(keys, offset) - 1]
        return o + offset - v

    at = 0
    for separator in [*SENTENCE_END.finditer(joined), None]:
        end = separator.start() if separator else len(joined)
        piece = joined[at:end]
        lead = len(piece) - len(piece.lstrip())
        yield piece, original(at + lead)
        at = separator.end() if separator else end


def _terms(text: str) -> frozenset[str]:
    """The words that carry meaning, stemmed (Snowball), so "deploying" and "deployment" meet at "deploy"."""
    return frozenset(_STEMMER.stemWords([w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]))


def _has(terms: frozenset[str], wanted: str) -> bool:
    """Whether the sentence has the term; a compound or longer form counts ("rollback" has "roll" and "back")."""
    return wanted in terms or any(
        len(t) >= 4
        and len(wanted) >= 4
        and (t.startswith(wanted) or t.endswith(wanted) or (len(t) >= 5 and wanted.startswith(t)))
        for t in terms
    )


def _sentences(passage: Passage) -> list[Sentence]:
    sentences: list[Sentence] = []
    headings = {1: passage.title}  # by level; the title stands above all of them
    for piece, offset in _pieces(passage.text):
        if heading := _HEADING.match(piece):
            # Headings name a topic; they answer nothing, but say what the sentences under them are about.
            level = heading.group(1).count("#")
            headings = {k: v for k, v in headings.items() if k < level} | {level: piece}
            continue
        text = _plain(piece)
        if len(_WORD.findall(text)) >= 3:
            context = _terms(_plain(" ".join(headings.values())))
            start = passage.start + offset
            sentences.append(
                Sentence(
                    n=passage.n,
                    index=len(sentences),
                    text=text,
                    terms=_terms(text),
                    context=context,
                    start=start,
                    end=start + len(piece.strip()),
                )
            )
    return sentences


def sentence_similarities(query: str, texts: list[str]) -> list[float] | None:
    """Each text's cosine similarity to the question with the local MiniLM; None with another provider.

    The thresholds were measured on MiniLM's cosines, which another model's do not resemble (and the
    tests' bag-of-words fake's are no judge of meaning), so other providers get the lexical test alone.
    """
    if settings.RAG_EMBEDDING_PROVIDER != "local" or not texts:
        return None
    provider = get_embedding_provider()
    keys = {t: "rag:s:" + hashlib.sha256(f"{provider.model_id}\x00{t}".encode()).hexdigest() for t in texts}
    cached = cache.get_many(list(keys.values()))
    vectors = {t: np.frombuffer(cached[k], dtype=np.float32) for t, k in keys.items() if k in cached}
    missing = [t for t in dict.fromkeys(texts) if t not in vectors]
    try:
        question = np.asarray(embed_query(query), dtype=np.float32)
        fresh = provider.embed(missing) if missing else []
    except (ProviderError, EmbeddingUnavailable) as exc:
        logger.warning("Embedding sentences failed, judging them by their words alone: %s", exc)
        return None
    for text, vector in zip(missing, fresh, strict=True):
        vectors[text] = np.asarray(vector, dtype=np.float32)
    cache.set_many({keys[t]: vectors[t].tobytes() for t in missing}, SENTENCE_CACHE_SECONDS)
    return [float(vectors[t] @ question) for t in texts]


class Relevance:
    """How well sentences answer the question, from 0 to 1.

    Lexically, the share of the question's content words they hold, each weighted by its rarity
    among the candidate sentences (an IDF over them), so a word every passage repeats weighs little
    and the word that tells the answer apart weighs most. With sentence similarities (MiniLM), the
    mean of that share and the best cosine among them.
    """

    def __init__(self, query: str, candidates: Sequence[Sentence], similarities: dict[Sentence, float] | None = None) -> None:
        count = max(1, len(candidates))
        self.weights = {w: math.log(1 + count / max(1, sum(_has(s.terms, w) for s in candidates))) for w in _terms(query)}
        self.total = sum(self.weights.values())
        self.similarities = similarities

    def coverage(self, *sentences: Sentence) -> float:
        """The rarity-weighted share of the question's content words the sentences hold."""
        if not self.total:
            return 0.0
        held = 0.0
        for word, weight in self.weights.items():
            if any(_has(s.terms, word) for s in sentences):
                held += weight
            elif any(_has(s.context, word) for s in sentences):
                held += CONTEXT_WEIGHT * weight
        return held / self.total

    def answered(self, words: frozenset[str]) -> Relevance:
        """The same test with `words` counted as held: a span of the asked kind answers them, not the sentence's words."""
        copy = Relevance.__new__(Relevance)
        copy.weights = {w: v for w, v in self.weights.items() if w not in words}
        copy.total = sum(copy.weights.values())
        copy.similarities = self.similarities
        return copy

    def score(self, *sentences: Sentence) -> float:
        if self.similarities is None:
            return self.coverage(*sentences)
        return (self.coverage(*sentences) + max(self.similarities[s] for s in sentences)) / 2


def _naming(sentences: list[Sentence], name: str) -> Sentence | None:
    """The first sentence that names `name` (as the graph matched it: normalised, on word boundaries)."""
    key = entity_key(name)
    return next((s for s in sentences if key and f" {key} " in f" {normalised_text(s.text)} "), None)


def _best(sentences: list[Sentence], relevance: Relevance) -> Sentence | None:
    scored = [(relevance.score(s), -s.index, s) for s in sentences]
    best = max(scored, key=lambda item: item[:2], default=None)
    return best[2] if best and best[0] > 0 else None


def _chain(
    start: int, by_n: dict[int, list[Sentence]], leads: dict[int, tuple[str, int]], relevance: Relevance
) -> list[Sentence] | None:
    """The chain the graph draws from passage `start`: its naming sentence, then the named passage's answer.

    Each hop's best sentence is kept where it adds to what the chain holds of the question (the
    film's own sentence holds "Night Train"), the naming sentences because they connect it.
    """
    chain: list[Sentence] = []
    n, seen = start, {start}
    while n in leads and len(seen) <= MAX_HOPS:
        name, target = leads[n]
        bridge = _naming(by_n[n], name)
        if bridge is None or target in seen:
            break
        best = _best(by_n[n], relevance)
        if best and best != bridge and relevance.coverage(*chain, bridge, best) > relevance.coverage(*chain, bridge):
            chain.extend(sorted((best, bridge), key=lambda s: s.index))
        else:
            chain.append(bridge)
        n = target
        seen.add(n)
    answer = _best(by_n.get(n, []), relevance) if chain else None
    return [*chain, answer] if answer and answer not in chain else None


def extractive_answer(
    query: str,
    passages: list[Passage],
    *,
    facts: Sequence[Fact] = (),
    count: int = EXTRACTIVE_ANSWERS,
    similarity: Similarity = sentence_similarities,
) -> str:
    """The text of `extract`: the sentences of `passages` that answer `query`, each cited."""
    return extract(query, passages, facts=facts, count=count, similarity=similarity).text


def extract(
    query: str,
    passages: list[Passage],
    *,
    facts: Sequence[Fact] = (),
    count: int = EXTRACTIVE_ANSWERS,
    similarity: Similarity = sentence_similarities,
) -> Extract:
    """The sentences of `passages` that answer `query`, best first, each cited; INSUFFICIENT_ANSWER when none does.

    The chain is followed where the graph links the passages: when a passage names the document
    another passage belongs to ("the director of X" is named in X's passage and answered in the
    director's), the sentence naming it and that passage's answer are quoted together, and the chain
    is judged by what it holds of the question as a whole. `similarity` gives each sentence's
    cosine to the question, or None to judge by words alone.
    """
    by_n: dict[int, list[Sentence]] = {}
    seen_texts: set[str] = set()
    for passage in passages:
        # Overlapping chunks repeat sentences: each is a candidate once, from the better-ranked passage.
        fresh = [s for s in _sentences(passage) if s.text not in seen_texts]
        seen_texts.update(s.text for s in fresh)
        by_n[passage.n] = fresh
    candidates = [s for sentences in by_n.values() for s in sentences]
    cosines = similarity(query, [s.text for s in candidates])
    relevance = Relevance(query, candidates, dict(zip(candidates, cosines, strict=True)) if cosines is not None else None)
    # Each passage leads to at most one other: the best-ranked passage whose document it names.
    leads: dict[int, tuple[str, int]] = {}
    for fact in sorted(facts, key=lambda f: f.target_n):
        if fact.n != fact.target_n and fact.n in by_n and fact.target_n in by_n:
            leads.setdefault(fact.n, (fact.target, fact.target_n))
    answers: list[list[Sentence]] = [[s] for s in candidates]
    answers += [chain for n in by_n if (chain := _chain(n, by_n, leads, relevance))]
    scored = sorted(((relevance.score(*a), a) for a in answers), key=lambda item: (-item[0], item[1][0].n, item[1][0].index))
    floor = max(MIN_SCORE, RELATIVE_SCORE * scored[0][0]) if scored else 1.0
    # The question's own path first: the named entity's fact, or each compared side's, with the span it states.
    typed = _typed(query, passages, by_n, facts, relevance)
    lines: list[str] = []
    quoted: set[Sentence] = set()
    quotes: dict[int, tuple[int, int]] = {}

    def quote(answer: Sequence[Sentence]) -> None:
        fresh = [s for s in answer if s not in quoted]
        if fresh:
            quoted.update(fresh)
            for s in fresh:
                quotes.setdefault(s.n, (s.start, s.end))
            lines.append("\n".join(f"- {s.text} [{s.n}]" for s in fresh))

    for group in typed.groups:
        quote(group)
    for score, answer in scored:
        if score < floor or len(lines) >= count:
            break
        quote(answer)
    if not lines:
        return Extract(INSUFFICIENT_ANSWER, {})
    intro = f"{EXTRACTIVE_INTRO} {typed.lead}" if typed.lead else EXTRACTIVE_INTRO
    return Extract(
        intro + "\n\n" + "\n".join(lines),
        quotes,
        lead=typed.lead,
        method=typed.method,
        hops=typed.hops,
        relation_held=typed.relation_held,
        roles_held=typed.roles_held,
        stuffed=any(_stuffed(s, relevance) for s in quoted),
    )


# A sentence whose words are at least this share of the question's own, or that repeats one of them this
# many times, is keyword-stuffed: it names what the question asks about without stating anything of it.
STUFFED_SHARE = 0.9
STUFFED_REPEATS = 3


def _stuffed(sentence: Sentence, relevance: Relevance) -> bool:
    words = [w for w in _STEMMER.stemWords(_WORD.findall(sentence.text.lower())) if w not in STOPWORDS]
    asked = [w for w in words if w in relevance.weights]
    if not asked:
        return False
    share, repeats = len(asked) / len(words), max(asked.count(w) for w in set(asked))
    # A long name repeats its words ("Ludwig Ferdinand of Bavaria"), but a sentence still says something of it.
    return (len(words) >= 6 and share >= STUFFED_SHARE) or (repeats >= STUFFED_REPEATS and share >= 0.5)


@dataclass(frozen=True)
class _Typed:
    """What the question's path gives: the lead line, the sentence groups to quote first, and how it was found."""

    lead: str | None = None
    groups: tuple[tuple[Sentence, ...], ...] = ()
    method: str = "sentences"
    hops: int = 0
    relation_held: bool = False
    roles_held: bool = False


# Words that name the kind of answer a question asks for: the lead's span answers them.
TYPE_WORDS = _terms(
    "nationality country countries place city town state date year day birthplace birth death when where name who age"
)

# Words that name the relation asked about: a sentence that states it by its form ("(1950 – 2004)") answers them.
RELATION_WORDS = _terms("born birth die died death released release founded established nationality")


def _ours(path: multihop.Path) -> tuple[Sentence, ...]:
    """A path's sentences, which are this module's (multihop reads them through a protocol)."""
    return cast(tuple[Sentence, ...], path.sentences)


def _typed(
    query: str, passages: list[Passage], by_n: dict[int, list[Sentence]], facts: Sequence[Fact], relevance: Relevance
) -> _Typed:
    """The answer along the question's path (rag.answering.multihop), when its sentences hold enough of the question."""
    question = read_question(query)
    titles = {p.n: p.title for p in passages}
    link_map = multihop.links(by_n, facts)
    if question.sides:
        comparison = multihop.compare(query, question, by_n, titles, link_map, relevance.score)
        if comparison is not None:
            groups = tuple(_ours(path) for _, path in comparison.sides)
            method = "comparison" if comparison.lead else "comparison-facts"
            hops = max(len(g) for g in groups)
            paths = [path for _, path in comparison.sides]
            return _Typed(
                lead=comparison.lead,
                groups=groups,
                method=method,
                hops=hops,
                relation_held=all(p.relation_held for p in paths),
                roles_held=all(p.roles_held for p in paths),
            )
        return _Typed()
    path = multihop.best_path(query, question, by_n, titles, link_map, relevance.score)
    answered = TYPE_WORDS | (RELATION_WORDS if path and path.relation_held else frozenset())
    if path and path.roles_held:
        # "son of X" answers "mother" and "father": the role's words are held by the bridge that crosses it.
        answered |= _terms(" ".join(multihop.roles(query)))
    if path is None or relevance.answered(answered).score(*_ours(path)) < MIN_SCORE:
        return _Typed()
    if not path.roles_held:
        # "The director of X" and no sentence names X's director: a date of X's own is no answer to lead with.
        return _Typed(groups=(_ours(path),), method="sentences", hops=len(path.sentences))
    return _Typed(
        lead=f"{path.span} [{path.answer.n}].",
        groups=(_ours(path),),
        method="path",
        hops=len(path.sentences),
        relation_held=path.relation_held,
        roles_held=path.roles_held,
    )
