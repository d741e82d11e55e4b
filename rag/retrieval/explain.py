"""Explanations of a search's hits, read from the rankings it fused: a pure function, run only when asked.

Every ranking a search runs holds only the viewer's visible candidates (the scope is in its SQL), so
a rank here is a place among what the viewer can read, and nothing in it moves when documents they
cannot read are added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rag.retrieval.hits import Explanation, Hit, Place


def explain_hits(
    hits: Sequence[Hit],
    rankings: Mapping[str, Sequence[Hit]],
    *,
    weights: Mapping[str, float] | None = None,
    relevances: Mapping[str, Mapping[int, float]] | None = None,
) -> None:
    """Attach to each of `hits` its place in each of `rankings` (best first, by name) that holds it.

    With `weights` (hybrid), the hit's score is the fused one and each ranking's contribution to it is
    weight x relevance / sum of weights, as rag.retrieval.fusion.relevance_fusion computes it; the
    relevances are `relevances` (by ranking, then chunk: those a ranking gave chunks beyond its top too)
    where given, else those of the places.
    """
    wanted = {hit.chunk_id for hit in hits}
    places = {
        name: {
            hit.chunk_id: Place(rank=rank, score=hit.score, relevance=hit.relevance)
            for rank, hit in enumerate(ranking, 1)
            if hit.chunk_id in wanted
        }
        for name, ranking in rankings.items()
    }
    total = sum(weights.values()) if weights else 0.0
    for hit in hits:
        found = {name: by_chunk[hit.chunk_id] for name, by_chunk in places.items() if hit.chunk_id in by_chunk}
        contributions = None
        if weights and total > 0:
            relevance = {name: place.relevance for name, place in found.items()}
            for name, by_chunk in (relevances or {}).items():
                relevance[name] = by_chunk.get(hit.chunk_id, relevance.get(name, 0.0))
            contributions = {
                name: weight * min(1.0, max(0.0, relevance.get(name, 0.0))) / total for name, weight in weights.items()
            }
        hit.explanation = Explanation(places=found, fused=hit.score if weights else None, contributions=contributions)
