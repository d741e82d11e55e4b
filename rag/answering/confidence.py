"""How confident an answer may be, and why: one documented rule over the passages it rests on.

Four factors decide the level, in this order:

1. **Evidence.** A passage supports the answer when its cosine similarity to the question reaches
   the threshold (`RAG_ANSWER_MIN_SCORE`); with none, confidence is insufficient. Otherwise the best
   passage's *strength*, how far it clears the threshold as a share of the room above it, sets the
   start: high from 0.4, medium from 0.15, low below.
2. **Passages.** One supporting passage alone is at most medium: nothing corroborates it.
3. **Documents.** Supporting passages from two or more distinct documents raise the level by one
   (independent sources agree).
4. **Recency.** When even the newest supporting document version is older than
   `RAG_ANSWER_STALE_DAYS` days, the level drops by one, never below low (old text may be out of date).

An extractive answer then answers for what it quotes (`answer_support`): similar passages are not
yet an answer. It may stay high only when its lead states a span of the kind the question asks for
(a date, a place, a name, a number, a side of a comparison) read from a sentence that states the
relation asked about ("born" for a birthplace), along a path whose bridges hold every role the
question asks through ("directed" for "the director of"); a comparison, only when it could compare
its sides. Without a lead it is at most medium; a quote that only repeats the question's words
(keyword-stuffed text) holds no relation at all and is at most low. These rules were calibrated on
the 2WikiMultiHopQA and MuSiQue training questions so that "high" is right at least 80% of the time
(docs/benchmarks.md).

Pure: no database, no settings. The caller passes only passages the asker may read, so no count can
include anything they may not see.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from rag.models import Confidence

# The strength from which the evidence alone is high, and medium.
STRONG, FAIR = 0.4, 0.15
# The levels an answer with evidence moves between, lowest first.
LEVELS = (Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH)
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Evidence:
    """What one passage brings: its similarity to the question, its document, and when that version was saved."""

    similarity: float
    document_id: uuid.UUID
    version_time: datetime | None = None


class ConfidenceFactors(TypedDict):
    """Why an answer has its confidence (`confidenceFactors` in rag.answer)."""

    topSimilarity: float | None
    threshold: float
    strength: float
    supportingPassages: int
    supportingDocuments: int
    newestVersionAgeDays: float | None
    staleAfterDays: int
    reasons: list[str]


@dataclass
class Assessment:
    level: str
    factors: ConfidenceFactors

    def overruled(self, level: str, reason: str) -> Assessment:
        """The same factors with `level` imposed by how the answer was made (`reason` says why)."""
        if level == self.level:
            return self
        factors: ConfidenceFactors = {**self.factors, "reasons": [*self.factors["reasons"], f"{reason}: {level}."]}
        return Assessment(level=level, factors=factors)


@dataclass(frozen=True)
class AnswerSupport:
    """What an extractive answer's reading of the question found (rag.answering.extractive.Extract)."""

    # path / comparison (both sides read and compared) / comparison-facts (read, not comparable) / sentences.
    method: str
    # The lead states a span of the asked type.
    lead: bool
    # The lead's sentence states the relation the question asks about (or it asks about none).
    relation_held: bool
    # Every role the question asks through ("the director of") is held by a bridge of the path.
    roles_held: bool
    # A quoted sentence is mostly the question's own words, repeated: keyword-stuffed, not a statement.
    stuffed: bool


def answer_support(assessment: Assessment, support: AnswerSupport) -> Assessment:
    """`assessment` (the passages' evidence) capped by what the extractive answer found in them."""
    if assessment.level == Confidence.INSUFFICIENT:
        return assessment
    if support.stuffed:
        return _at_most(assessment, Confidence.LOW, "A quoted sentence only repeats the question's words")
    if support.method == "comparison" and support.relation_held:
        return assessment
    if support.method == "path" and support.lead and support.relation_held and support.roles_held:
        return assessment
    if support.method == "comparison":
        why = "The comparison rests on facts that do not state the relation asked about"
    elif support.method == "comparison-facts":
        why = "Each side's fact was quoted, but they could not be compared"
    elif support.lead and not support.roles_held:
        why = "No quoted sentence connects the question's entity to the one the answer is about"
    elif support.lead:
        why = "The quoted sentence does not state the relation the question asks about"
    else:
        why = "No quoted sentence states an answer of the kind the question asks for"
    return _at_most(assessment, Confidence.MEDIUM, why)


def _at_most(assessment: Assessment, level: str, reason: str) -> Assessment:
    if LEVELS.index(assessment.level) <= LEVELS.index(level):
        return assessment
    return assessment.overruled(level, reason)


def assess_confidence(evidence: Sequence[Evidence], *, threshold: float, stale_after_days: int, now: datetime) -> Assessment:
    """The confidence level of an answer resting on `evidence`, with the factors and the reasons for it."""
    supporting = [e for e in evidence if e.similarity >= threshold]
    top = max((e.similarity for e in evidence), default=None)
    times = [e.version_time for e in supporting if e.version_time is not None]
    newest_age = round(max(0.0, (now - max(times)).total_seconds()) / SECONDS_PER_DAY, 1) if times else None
    documents = len({e.document_id for e in supporting})
    strength = max(0.0, ((top or 0.0) - threshold) / max(1e-9, 1.0 - threshold)) if supporting else 0.0
    reasons: list[str] = []

    def factors() -> ConfidenceFactors:
        return {
            "topSimilarity": None if top is None else round(top, 6),
            "threshold": threshold,
            "strength": round(strength, 6),
            "supportingPassages": len(supporting),
            "supportingDocuments": documents,
            "newestVersionAgeDays": newest_age,
            "staleAfterDays": stale_after_days,
            "reasons": reasons,
        }

    if not supporting:
        reasons.append(
            "No passage was found: insufficient."
            if top is None
            else f"No passage reaches the evidence threshold {threshold:g} (the best has {top:.2f}): insufficient."
        )
        return Assessment(level=Confidence.INSUFFICIENT, factors=factors())

    rank = 2 if strength >= STRONG else 1 if strength >= FAIR else 0
    reasons.append(
        f"The best passage's similarity {top:.2f} clears the threshold {threshold:g} "
        f"by {strength:.0%} of the room above it: {LEVELS[rank]}."
    )
    if len(supporting) == 1 and rank > 1:
        rank = 1
        reasons.append(f"Only one passage supports the answer: at most {LEVELS[rank]}.")
    if documents >= 2 and rank < 2:
        rank += 1
        reasons.append(f"{len(supporting)} passages from {documents} documents support the answer: one level up, {LEVELS[rank]}.")
    if stale_after_days and newest_age is not None and newest_age > stale_after_days and rank > 0:
        rank -= 1
        reasons.append(
            f"The newest supporting version is {newest_age:g} days old (over {stale_after_days}): one level down, {LEVELS[rank]}."
        )
    return Assessment(level=LEVELS[rank], factors=factors())
