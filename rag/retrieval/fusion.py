"""Fusion of rankings, pure functions: score-aware (a weighted mean of relevances), spreading a page over documents,
and interleaving pages of different models."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

_Id = TypeVar("_Id", bound=Hashable)


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


def spread_documents(
    ranked: Sequence[tuple[_Id, float]],
    document_of: Mapping[_Id, object],
    *,
    per_document: int,
    repeat_decay: float = 1.0,
) -> list[_Id]:
    """The ids of best-first (id, score) pairs, spread over documents: one long document should not fill the top of a page.

    A document's second item competes at `repeat_decay` times its score, its third at the square, and so
    on (a document's own items keep their order); and at most `per_document` of one document come before
    every other document's items, the rest following in order.
    """
    if not 0 < repeat_decay <= 1:
        raise ValueError("repeat_decay must be in (0, 1]")
    seen: dict[object, int] = {}
    decayed: list[tuple[float, int, _Id]] = []
    for position, (item, score) in enumerate(ranked):
        document = document_of.get(item)
        decayed.append((score * repeat_decay ** seen.get(document, 0), position, item))
        seen[document] = seen.get(document, 0) + 1
    first: list[_Id] = []
    later: list[_Id] = []
    taken: dict[object, int] = {}
    for _, _, item in sorted(decayed, key=lambda entry: (-entry[0], entry[1])):
        document = document_of.get(item)
        taken[document] = taken.get(document, 0) + 1
        (first if taken[document] <= per_document else later).append(item)
    return first + later


_Item = TypeVar("_Item")


def interleave(pages: Sequence[Sequence[_Item]]) -> list[_Item]:
    """Pages ranked by different embedding models, merged by rank: the first of each page, then the second of each, ...

    Each model scores on its own scale (the cosines of two models say nothing of each other), so
    only the ranks are compared; at equal rank the earlier page comes first.
    """
    merged: list[_Item] = []
    for rank in range(max((len(page) for page in pages), default=0)):
        merged.extend(page[rank] for page in pages if rank < len(page))
    return merged
