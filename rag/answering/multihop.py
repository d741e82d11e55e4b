"""Answers that follow the graph: from the entity a question names, across the documents it links to, to the
sentence that states the kind of answer the question asks for.

"Where was the director of Night Train born?" names Night Train. Its passage names Vera Lind, a
document of its own, in the sentence that says she directed it (a *bridge*: the graph's fact that
the passage names her document), and Vera Lind's passage says where she was born. The answer
leads with that span ("Oslo") and quotes the sentence of each hop, each cited.

A comparison ("Who was born first, A or B?", "Are X and Y from the same country?") reads the same
fact for each side, along the same kind of path, quotes both, and states the comparison when both
facts are dates, numbers or places of the same kind.

Paths are scored by what they hold of the question (rarity-weighted words and, with MiniLM, the
sentence's similarity: `Relevance`), with the answer's sentence worth more when it states the
relation asked about ("born", "died", ...) and a bridge worth more when it holds the role the
question asks for ("directed" for "director", "son of" for "father"). A kinship word that is two roles
("paternal grandfather", "father-in-law") is followed as both: the father's father, the spouse's father.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rag.answering.answer_types import LIFE_RANGE, AnswerType, Question, date_key, number_value, relation_span, spans
from rag.corpus.names import entity_key, normalised_text

# Relations a sentence states by other words than the question's: a question's role noun -> what a
# sentence naming the role's holder says.
ROLE_CUES: dict[str, tuple[str, ...]] = {
    "father": ("son of", "daughter of", "child of", "father", "born to", "sons of", "children of"),
    "mother": ("son of", "daughter of", "child of", "mother", "born to", "sons of", "children of"),
    "parent": ("son of", "daughter of", "child of", "born to"),
    "son": ("son", "sons", "children", "father of", "mother of"),
    "daughter": ("daughter", "daughters", "children", "father of", "mother of"),
    "child": ("son", "daughter", "children", "father of", "mother of"),
    "wife": ("married", "wife", "spouse", "widow"),
    "husband": ("married", "husband", "spouse", "widower"),
    "spouse": ("married", "wife", "husband", "spouse"),
    "director": ("directed", "director"),
    "composer": ("composed", "composer", "music by", "score by", "written by", "wrote", "songwriter"),
    "performer": ("performed", "performer", "sung by", "recorded by", "singer", "by"),
    "producer": ("produced", "producer"),
    "writer": ("written", "writer", "wrote", "author"),
    "author": ("written", "writer", "wrote", "author"),
    "founder": ("founded", "founder", "established"),
    "creator": ("created", "creator"),
}
RELATION_CUES: dict[str, tuple[str, ...]] = {
    "birth": ("born", "birth", "b."),
    "death": ("died", "death", "d.", "killed", "buried"),
    "release": ("released", "release", "premiered", "published", "film", "album", "song", "single", "novel", "book"),
    "founding": ("founded", "established", "formed", "created", "opened", "built"),
    "nationality": ("national", "nationality", "citizen", "citizenship"),
}
# What states a nationality without a cue word: the adjective itself ("a Norwegian director").
NATIONALITY_ADJECTIVE = re.compile(r"^[A-Z][a-z]+(?:an|ian|ese|ish|ic|i|ch)$")
# How much the answer's sentence stating the relation asked about, and a bridge holding the role, weigh
# beside the path's relevance (0-1). Chosen on the tuning half of the training questions.
RELATION_WEIGHT = 0.4
ROLE_WEIGHT = 0.3
SPAN_BY_CUE_WEIGHT = 0.1
# A path of more hops must hold more of the question: each hop past the first costs this much.
HOP_COST = 0.05
# At most this many hops from the named entity.
MAX_HOPS = 2


class Sentence(Protocol):
    """rag.answering.extractive.Sentence, as far as paths read it (that module imports this one)."""

    @property
    def n(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def text(self) -> str: ...


Score = Callable[..., float]


@dataclass(frozen=True)
class Path:
    """The sentences of a path, in order (each hop's, then the answer's), and the answer span the last one states."""

    sentences: tuple[Sentence, ...]
    span: str
    score: float
    # The last sentence states the relation asked about ("born"), or the question asks about none.
    relation_held: bool = True
    # Every role the question asks through is held by a bridge ("directed" for "the director of").
    roles_held: bool = True

    @property
    def answer(self) -> Sentence:
        return self.sentences[-1]


@dataclass(frozen=True)
class Comparison:
    """The fact read for each side (only the sides that gave one), and what comparing them says (None: the facts
    cannot be compared, or a side gave none)."""

    sides: tuple[tuple[str, Path], ...]
    lead: str | None


def _words(text: str) -> str:
    return f" {normalised_text(text)} "


def _has_cue(text: str, cues: Sequence[str]) -> bool:
    words = _words(text)
    return any(f" {normalised_text(cue)} " in words for cue in cues)


# A role asked by its verb ("Who directed X?" asks for X's director).
ROLE_VERBS = {
    "directed": "director",
    "composed": "composer",
    "wrote": "writer",
    "written": "writer",
    "produced": "producer",
    "performed": "performer",
    "sang": "performer",
    "founded": "founder",
    "created": "creator",
    "married": "spouse",
}


# Kinship a question names in one word that is two roles, the answer's first: a paternal grandfather is the
# father of the father, a father-in-law the father of the spouse, a son-in-law the spouse of a child.
KINSHIP = {
    "paternal grandfather": "father father",
    "paternal grandmother": "mother father",
    "maternal grandfather": "father mother",
    "maternal grandmother": "mother mother",
    "father in law": "father spouse",
    "mother in law": "mother spouse",
    "son in law": "spouse child",
    "daughter in law": "spouse child",
    "child in law": "spouse child",
}
_KINSHIP = re.compile(r"\b(" + "|".join(KINSHIP) + r")\b")


def roles(query: str) -> list[str]:
    """The role nouns the question asks through ("the director of", "X's mother"), in the order it names them."""
    words = _KINSHIP.sub(lambda m: KINSHIP[m.group(1)], normalised_text(query)).split()
    return [ROLE_VERBS.get(w, w) for w in words if w in ROLE_CUES or w in ROLE_VERBS]


def bridged_roles(query: str, question: Question) -> list[str]:
    """The roles a path must cross by a bridge: all that the question asks through, save the person it asks for
    ("Who is the mother of the director of X?" asks for the mother, whom the director's page names)."""
    asked = roles(query)
    return asked[1:] if question.type == AnswerType.PERSON else asked


def named(query: str, titles: dict[int, str]) -> list[int]:
    """The passages whose document the question names by its title, longest title first.

    A title's trailing qualifier ("Harbour (Film)") need not be written.
    """
    asked = _words(query)
    found = []
    for n, title in titles.items():
        keys = {entity_key(title), entity_key(re.sub(r"\s*\([^)]*\)\s*$", "", title))}
        key = max((k for k in keys if k and f" {k} " in asked), key=len, default=None)
        if key:
            found.append((len(key), -n, n))
    return [n for *_, n in sorted(found, reverse=True)]


def side_passage(side: str, titles: dict[int, str]) -> int | None:
    """The passage whose document a comparison's side names (the best-ranked when several do)."""
    key = entity_key(side)
    exact = [n for n, t in titles.items() if entity_key(t) == key or entity_key(re.sub(r"\s*\([^)]*\)\s*$", "", t)) == key]
    if exact:
        return min(exact)
    near = [n for n, t in titles.items() if key and (f" {key} " in _words(t) or f" {entity_key(t)} " in f" {key} ")]
    return min(near) if near else None


def links(by_n: Mapping[int, Sequence[Sentence]], facts: Sequence) -> dict[int, list[tuple[int, Sentence]]]:
    """For each passage, the passages whose document one of its sentences names, with that sentence.

    The graph's facts say which documents a passage names (none without the graph: `includeGraph`);
    the bridge is the passage's first sentence that writes the name.
    """
    found: dict[int, dict[int, Sentence]] = {}

    def add(n: int, m: int, name: str) -> None:
        key = entity_key(name)
        if n == m or not key or m not in by_n:
            return
        sentence = next((s for s in by_n.get(n, []) if f" {key} " in _words(s.text)), None)
        if sentence is not None:
            found.setdefault(n, {}).setdefault(m, sentence)

    for fact in facts:
        add(fact.n, fact.target_n, fact.target)
    return {n: list(targets.items()) for n, targets in found.items()}


def _answer_candidates(
    sentences: Sequence[Sentence], question: Question, *, exclude: str, own: str
) -> list[tuple[Sentence, str, bool]]:
    """The sentences that state a span of the asked type: (sentence, span, whether a cue of the relation picked it)."""
    out = []
    for s in sentences:
        span = relation_span(s.text, question, exclude=exclude)
        if question.type == AnswerType.PERSON and span and entity_key(span) == entity_key(own):
            spans = [x for x in _person_spans(s.text, exclude=exclude) if entity_key(x) != entity_key(own)]
            span = spans[0] if spans else None
        if span:
            cues = RELATION_CUES.get(question.relation or "", ())
            by_cue = bool(cues) and _has_cue(s.text, cues)
            if question.relation in ("birth", "death") and question.type == AnswerType.DATE:
                by_cue = by_cue or bool(LIFE_RANGE.search(s.text))  # "(1950 – 2004)" states both
            if question.relation == "nationality":
                by_cue = by_cue or bool(NATIONALITY_ADJECTIVE.match(span))
            if question.type == AnswerType.PERSON:
                # A person is the answer when the sentence names them in the role asked ("son of X" for a father).
                asked = roles(exclude)[:1]
                by_cue = bool(asked) and _has_cue(s.text, ROLE_CUES[asked[0]])
            out.append((s, span, by_cue))
    return out


def _person_spans(text: str, *, exclude: str) -> list[str]:
    return spans(text, Question(type=AnswerType.PERSON), exclude=exclude)


def best_path(
    query: str,
    question: Question,
    by_n: Mapping[int, Sequence[Sentence]],
    titles: dict[int, str],
    link_map: dict[int, list[tuple[int, Sentence]]],
    score: Score,
    *,
    starts: list[int] | None = None,
) -> Path | None:
    """The best path from the passages the question names (or `starts`) to a sentence stating the asked span."""
    if question.type in (AnswerType.OTHER, AnswerType.YES_NO):
        return None
    starts = starts if starts is not None else named(query, titles)
    if not starts:
        return None
    asked_roles = bridged_roles(query, question)
    role_cues = tuple(c for r in asked_roles for c in ROLE_CUES[r])
    best: Path | None = None
    for start in starts:
        frontier: list[tuple[int, tuple[Sentence, ...]]] = [(start, ())]
        for hops in range(MAX_HOPS + 1):
            next_frontier = []
            for n, bridges in frontier:
                for sentence, span, by_cue in _answer_candidates(by_n.get(n, []), question, exclude=query, own=titles.get(n, "")):
                    if sentence in bridges:
                        continue
                    chain = (*bridges, sentence)
                    value = score(*chain)
                    value += RELATION_WEIGHT * by_cue + SPAN_BY_CUE_WEIGHT * by_cue
                    held = min(sum(_has_cue(b.text, role_cues) for b in bridges), len(asked_roles)) if role_cues else 0
                    # A role the question asks through and no bridge holds: the path misses a hop.
                    value += ROLE_WEIGHT * (held - len(asked_roles)) / max(1, len(asked_roles))
                    value -= HOP_COST * max(0, hops - 1)
                    if best is None or value > best.score:
                        best = Path(
                            sentences=chain,
                            span=span,
                            score=value,
                            # A date or number of a relation no cue names ("when did it end?") may be any of
                            # the dates a sentence gives: only a place is taken on the sentence's word.
                            relation_held=by_cue
                            or (question.relation not in RELATION_CUES and question.type == AnswerType.PLACE),
                            roles_held=held == len(asked_roles),
                        )
                if hops < MAX_HOPS:
                    seen = {b.n for b in bridges} | {start}
                    next_frontier += [(m, (*bridges, b)) for m, b in link_map.get(n, []) if m not in seen]
            frontier = next_frontier
    return best


def compare(
    query: str,
    question: Question,
    by_n: Mapping[int, Sequence[Sentence]],
    titles: dict[int, str],
    link_map: dict[int, list[tuple[int, Sentence]]],
    score: Score,
) -> Comparison | None:
    """Each side's fact (the same relation, along the same kind of path), and the comparison when they compare."""
    if len(question.sides) != 2:
        return None
    # The fact compared: a date for "first", "later", "born", "released"; a place for "same country".
    kind = (
        AnswerType.PLACE
        if question.order == "same"
        else AnswerType.NUMBER
        if question.order in ("more", "less")
        else AnswerType.DATE
    )
    fact_question = Question(type=kind, relation=question.relation)
    read: list[tuple[str, Path]] = []
    compared = True
    for side in question.sides:
        n = side_passage(side, titles)
        path = None if n is None else best_path(side, fact_question, by_n, titles, link_map, score, starts=[n])
        if n is None or path is None:
            compared = False  # nothing read of this side: the other is still quoted, with nothing to compare
            continue
        if roles(query) and len(path.sentences) < 2:
            # "Which film has the director born first": each side's fact is its director's, a hop away; the
            # film's own date is no answer to it, but what its passage says still belongs in the answer.
            linked = best_path(query, fact_question, by_n, titles, link_map, score, starts=[n])
            if linked is None or len(linked.sentences) < 2:
                compared = False
            else:
                path = linked
        read.append((side, path))
    if not read:
        return None
    if not compared:
        return Comparison(sides=tuple(read), lead=None)
    (a, pa), (b, pb) = read
    lead = None
    if question.order == "same":
        same = _same_place(pa.span, pb.span)
        if same is not None:
            cites = f"[{pa.answer.n}][{pb.answer.n}]" if pa.answer.n != pb.answer.n else f"[{pa.answer.n}]"
            lead = f"Yes: both {pa.span} {cites}." if same else f"No: {pa.span} [{pa.answer.n}], {pb.span} [{pb.answer.n}]."
    elif question.order in ("earlier", "later"):
        ka, kb = date_key(pa.span), date_key(pb.span)
        if ka and kb and ka != kb and _comparable(ka, kb):
            earlier = ka < kb
            first = (a, pa) if earlier == (question.order == "earlier") else (b, pb)
            other = (b, pb) if first[0] == a else (a, pa)
            lead = (
                f"{first[0]} ({first[1].span} [{first[1].answer.n}], against {other[1].span} [{other[1].answer.n}] "
                f"for {other[0]})."
            )
    elif question.order in ("more", "less"):
        va, vb = number_value(pa.span), number_value(pb.span)
        if va is not None and vb is not None and va != vb:
            first = (a, pa) if (va > vb) == (question.order == "more") else (b, pb)
            other = (b, pb) if first[0] == a else (a, pa)
            lead = f"{first[0]} ({first[1].span} [{first[1].answer.n}], against {other[1].span} [{other[1].answer.n}])."
    return Comparison(sides=tuple(read), lead=lead)


def _comparable(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Two dates order only where both give what tells them apart (1950 and May 1950 do not)."""
    if a[0] != b[0]:
        return True
    return bool(a[1] and b[1]) and (a[1] != b[1] or bool(a[2] and b[2]))


def _same_place(a: str, b: str) -> bool | None:
    """Whether two places are the same, when they are the same kind (two nationalities, or two names); else None."""
    adjective = NATIONALITY_ADJECTIVE
    if bool(adjective.match(a)) != bool(adjective.match(b)):
        return None
    ka, kb = entity_key(a), entity_key(b)
    if bool(adjective.match(a)):
        return ka == kb
    # Names: the broadest part of each ("Glen Cove, New York" is in New York) decides.
    return entity_key(a.split(",")[-1]) == entity_key(b.split(",")[-1])
