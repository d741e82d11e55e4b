"""Weighted Reciprocal Rank Fusion over ranked id lists: a pure function."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
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
