"""Fusion of rankings, pure functions: score-aware (a weighted mean of relevances) and Reciprocal Rank Fusion."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60

_Id = TypeVar("_Id", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[_Id]], *, weights: Sequence[float] | None = None, k: int = RRF_K
) -> list[tuple[_Id, float]]:
    """Fuse best-first rankings into one: score(id) = sum of weight / (k + rank), rank from 1.

    An id repeated within one ranking counts once, at its best rank. Ties keep the order of
    first appearance across the rankings, so the result is deterministic.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    if k < 1:
        raise ValueError("k must be at least 1")
    scores: dict[_Id, float] = {}
    for ranking, weight in zip(rankings, weights, strict=False):
        seen: set[_Id] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


def max_rrf_score(weights: Sequence[float], k: int = RRF_K) -> float:
    """The score of an id ranked first everywhere: used to scale fused scores into [0, 1]."""
    return sum(weights) / (k + 1)


def relevance_fusion(rankings: Sequence[Sequence[tuple[_Id, float]]], *, weights: Sequence[float]) -> list[tuple[_Id, float]]:
    """Fuse rankings of (id, relevance in [0, 1]) into one: the weighted mean of each id's relevances.

    A convex combination of scores on a common scale (Bruch et al. 2023): unlike rank fusion, a
    ranking's weak top match adds little and a strong match counts however the others ranked it.
    An id a ranking did not return counts as 0 there. Ties keep the order of first appearance.
    """
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    total = sum(weights)
    if total <= 0:
        raise ValueError("the weights must not all be zero")
    scores: dict[_Id, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        best: dict[_Id, float] = {}
        for item, relevance in ranking:
            best[item] = max(best.get(item, 0.0), min(1.0, max(0.0, relevance)))
        for item, relevance in best.items():
            scores[item] = scores.get(item, 0.0) + weight * relevance / total
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


def spread_documents(ranked: Sequence[_Id], document_of: Mapping[_Id, object], *, per_document: int) -> list[_Id]:
    """The same items, but at most `per_document` of one document before every other document's
    items; the rest follow in order. One long document should not fill the top of a page."""
    first: list[_Id] = []
    later: list[_Id] = []
    taken: dict[object, int] = {}
    for item in ranked:
        document = document_of.get(item)
        taken[document] = taken.get(document, 0) + 1
        (first if taken[document] <= per_document else later).append(item)
    return first + later
