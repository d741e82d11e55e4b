"""Graph ranking: from the entities a question names (and the best chunks of the other rankings),
spread over at most two hops of relations, then rank the chunks that carry the entities reached.

A bounded Personalized-PageRank-like spread in the spirit of HippoRAG. Every step joins its rows
with the scope's visible documents inside SQL: an entity counts only through a visible mention,
a hop only through a relation read from a visible chunk (and a fact that exists only because some
document's title names it, only when that document is visible: rag.retrieval.graph_policy), so
nothing a viewer cannot read moves their ranking. Hubs are bounded: each entity contributes at most a fixed number of neighbours
and of chunks.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import NamedTuple

from config.replicas import read_connection
from rag.corpus.names import is_meaningful_key, normalised_text
from rag.retrieval.graph_policy import mention_counts, relation_counts, titled_document_visible
from rag.retrieval.hits import Hit
from rag.retrieval.prepared import prepared_cursor
from rag.retrieval.visibility import SearchScope

MAX_NAME_WORDS = 8
SEED_FROM_QUESTION = 1.0
# The best chunks of the vector and keyword rankings seed their documents' entities, less strongly.
SEED_FROM_RANKINGS = 0.5
HOP_DECAY = 0.7
HOPS = 2
NEIGHBOURS_PER_ENTITY = 30
CHUNKS_PER_ENTITY = 50
MAX_FRONTIER = 100
NEXT_HOP_MIN_SCORE = 0.3
NEXT_HOP_FRONTIER = 10
# A chunk that names entities counts less than the chunks of the document an entity is the title of,
# and by its best-reached entity only: naming many related names is what keyword search already sees.
MENTION_FACTOR = 0.3
SAME_DOCUMENT_DECAY = 0.5
# A hub's visible mentions are counted up to this many: enough to tell it from a specific name, bounded per hop.
HUB_COUNT_CAP = 200
# The chunks remembered per step of a spread as the ones an entity was reached through (the heaviest relations').
VIA_CHUNKS = 20


def question_keys(query: str) -> list[str]:
    """Every run of up to MAX_NAME_WORDS words of the normalised question: the names it might contain."""
    words = normalised_text(query).split()
    keys = {" ".join(words[i : i + n]) for n in range(1, MAX_NAME_WORDS + 1) for i in range(len(words) - n + 1)}
    return [key for key in keys if is_meaningful_key(key)]


def _longest_only(found: dict[uuid.UUID, str]) -> dict[uuid.UUID, str]:
    """Drop names inside a longer name the question also contains ("hesse" inside "landgrave of hesse")."""
    keys = list(found.values())
    return {pk: key for pk, key in found.items() if not any(key != other and f" {key} " in f" {other} " for other in keys)}


def specificity(mentions: float, chunks: float) -> float:
    """An entity's weight by how few of the viewer's `chunks` mention it, in (0, 1]: an IDF, so a hub adds little."""
    chunks = max(chunks, 2.0)
    return math.log(1 + chunks / max(mentions, 1.0)) / math.log(1 + chunks)


def _question_entities(
    scope: SearchScope, query: str, model_id: str, scope_chunks: int = 0
) -> tuple[dict[uuid.UUID, float], bool]:
    """The visible entities the question names, by their specificity, and whether one is a visible document's title.

    A name the question shares with every other passage ("breast cancer" in a medical corpus) is
    what keyword search already weighs; a specific one is what the graph adds.
    """
    seeds: dict[uuid.UUID, float] = {}
    names_documents = False
    keys = question_keys(query)
    if not keys:
        return seeds, names_documents
    visible, visible_params = scope.named  # joined inline, as in `_spread`
    collections, collections_params = scope.collections_named
    with prepared_cursor() as cursor:
        # One statement whatever the names match: whether the team holds an entity of that name in documents the
        # viewer cannot read must not change what runs (a second statement only when one exists told them so by
        # its time). The team's entities by name first (an index lookup, materialised): the planner, guessing
        # dozens, would otherwise scan every mention to join them.
        cursor.execute(
            f"""WITH named AS MATERIALIZED (
                    SELECT id, key FROM graph_entities WHERE team_id = %(team)s AND key = ANY(%(keys)s)),
                e AS (
                    SELECT e.id, e.key, {titled_document_visible("e.id", "%(model)s", f"({visible})")} AS title_ok
                    FROM named e)
                -- Counted up to HUB_COUNT_CAP, as a hop counts what it reaches, not every visible mention of a
                -- name thousands of passages share (at 1M chunks up to 31 ms, now 14;
                -- bench/latency.py). Among the mentions that count, one is its document's subject exactly
                -- when the entity is a visible document's title: title_ok.
                SELECT e.id, e.key, e.title_ok, d.n FROM e, LATERAL (
                    SELECT count(*) AS n FROM (
                        SELECT 1 FROM graph_mentions m
                        JOIN ({visible}) v ON v.id = m.document_id AND v.version = m.document_version
                        WHERE m.entity_id = e.id AND m.model_id = %(model)s AND m.collection_id = ANY(ARRAY({collections}))
                          AND {mention_counts("m", f"({visible})", title_visible="e.title_ok")}
                        LIMIT %(cap)s) z) d
                WHERE d.n > 0""",
            {
                **visible_params,
                **collections_params,
                "team": scope.user.team_id,
                "keys": keys,
                "model": model_id,
                "cap": HUB_COUNT_CAP,
            },
        )
        rows = cursor.fetchall()
    titles = {pk for pk, _, is_title, _ in rows if is_title}
    mentions = {pk: count for pk, _, _, count in rows}
    for pk in _longest_only({pk: key for pk, key, _, _ in rows}):
        seeds[pk] = SEED_FROM_QUESTION * specificity(mentions[pk], scope_chunks)
        names_documents = names_documents or pk in titles
    return seeds, names_documents


def _ranking_entities(seed_chunk_ids: list[int], model_id: str) -> dict[uuid.UUID, float]:
    """The entities the seed chunks are about (their documents' subjects), the best-ranked chunk's weight each."""
    if not seed_chunk_ids:
        return {}
    with read_connection().cursor() as cursor:
        # These chunks came from rankings that already filtered by the scope.
        cursor.execute(
            "SELECT chunk_id, entity_id FROM graph_mentions WHERE chunk_id = ANY(%s) AND subject AND model_id = %s",
            [seed_chunk_ids, model_id],
        )
        rows = cursor.fetchall()
    rank = {chunk_id: i for i, chunk_id in enumerate(seed_chunk_ids, start=1)}
    seeds: dict[uuid.UUID, float] = {}
    for chunk_id, entity_id in rows:
        seeds[entity_id] = max(seeds.get(entity_id, 0.0), SEED_FROM_RANKINGS / rank[chunk_id])
    return seeds


def _spread(
    scope: SearchScope, model_id: str, seeds: dict[uuid.UUID, float], spread_only: set[uuid.UUID], scope_chunks: int = 0
) -> tuple[dict[uuid.UUID, float], dict[uuid.UUID, set[int]]]:
    """Scores of the entities reached in up to HOPS hops, each hop through visible relations only, and the
    chunks each was reached through (the relations' chunks, up to VIA_CHUNKS a step).

    Entities in `spread_only` (the documents the other rankings already put on top) pass their
    score on but are not ranked for it themselves: the graph adds what they lead to.
    """
    scores = {pk: score for pk, score in seeds.items() if pk not in spread_only}
    via: dict[uuid.UUID, set[int]] = {}
    frontier = dict(seeds)
    # The scope joined inline, not as a materialised set: each lateral step then finds its few rows'
    # documents through the primary key instead of scanning every visible document again.
    visible, visible_params = scope.named
    # The readable collections' facts only, through the indexes that lead with the collection after the entity:
    # a hub's facts elsewhere in the team are passed over, not each checked against the visible documents.
    collections, collections_params = scope.collections_named
    # One transaction (its generic-plan setting) for every hop of the spread.
    with prepared_cursor() as cursor:
        for _ in range(HOPS):
            if not frontier:
                break
            ids, weights = list(frontier), [frontier[pk] for pk in frontier]
            # Both directions: "the director of X" is X -> director, "X's father" may be written on the father's page.
            cursor.execute(
                f"""WITH s AS (
                        SELECT s.id, s.score, {titled_document_visible("s.id", "%(model)s", f"({visible})")} AS title_ok
                        FROM unnest(%(ids)s::uuid[], %(weights)s::float8[]) AS s(id, score)),
                    hop AS (
                    SELECT n.id, s.score * n.share AS score, n.via
                    FROM s, LATERAL (
                        SELECT x.id, x.w / max(x.w) OVER () AS share, x.via FROM (
                            SELECT r.target_id AS id, sum(r.weight) AS w,
                                   (array_agg(r.chunk_id ORDER BY r.weight DESC))[1:%(via)s] AS via
                            FROM graph_relations r
                            JOIN ({visible}) v ON v.id = r.document_id AND v.version = r.document_version
                            WHERE r.source_id = s.id AND r.model_id = %(model)s AND r.collection_id = ANY(ARRAY({collections}))
                              AND {relation_counts("r", f"({visible})", source_visible="s.title_ok")}
                            GROUP BY r.target_id
                            UNION ALL
                            SELECT r.source_id, sum(r.weight) * 0.5, (array_agg(r.chunk_id ORDER BY r.weight DESC))[1:%(via)s]
                            FROM graph_relations r
                            JOIN ({visible}) v ON v.id = r.document_id AND v.version = r.document_version
                            WHERE r.target_id = s.id AND r.model_id = %(model)s AND r.collection_id = ANY(ARRAY({collections}))
                              AND {relation_counts("r", f"({visible})", target_visible="s.title_ok")}
                            GROUP BY r.source_id
                        ) x ORDER BY x.w DESC LIMIT %(neighbours)s) n),
                    reached AS (SELECT id, sum(score) AS score FROM hop GROUP BY id),
                    reached_via AS (SELECT h.id, array_agg(DISTINCT c) AS via FROM hop h, unnest(h.via) c GROUP BY h.id)
                    -- A reached entity counts by its specificity among the visible passages (see `specificity`).
                    SELECT r.id, r.score * ln(1 + %(n)s / greatest(d.n, 1)) / ln(1 + %(n)s), rv.via
                    FROM reached r LEFT JOIN reached_via rv USING (id),
                    LATERAL (SELECT {titled_document_visible("r.id", "%(model)s", f"({visible})")} AS ok) t,
                    LATERAL (
                        SELECT count(*) AS n FROM (
                            SELECT 1 FROM graph_mentions m
                            JOIN ({visible}) v ON v.id = m.document_id AND v.version = m.document_version
                            WHERE m.entity_id = r.id AND m.model_id = %(model)s AND m.collection_id = ANY(ARRAY({collections}))
                              AND {mention_counts("m", f"({visible})", title_visible="t.ok")}
                            LIMIT %(cap)s) z) d""",
                {
                    **visible_params,
                    **collections_params,
                    "ids": ids,
                    "weights": weights,
                    "model": model_id,
                    "neighbours": NEIGHBOURS_PER_ENTITY,
                    "n": float(max(scope_chunks, 2)),
                    "cap": HUB_COUNT_CAP,
                    "via": VIA_CHUNKS,
                },
            )
            rows = cursor.fetchall()
            reached = {pk: float(score) * HOP_DECAY for pk, score, _ in rows}
            for pk, _, chunks in rows:
                via.setdefault(pk, set()).update(chunks or ())
            frontier = {}
            for pk, score in sorted(reached.items(), key=lambda item: -item[1])[:MAX_FRONTIER]:
                if pk in spread_only:
                    continue  # a way back to where this spread started adds nothing
                # Only strongly reached entities spread further: a second hop from a weak one is noise.
                if score >= NEXT_HOP_MIN_SCORE and len(frontier) < NEXT_HOP_FRONTIER:
                    frontier[pk] = score
                scores[pk] = scores.get(pk, 0.0) + score
    return scores, via


class GraphRanking(NamedTuple):
    hits: list[Hit]
    # The question names a document the viewer can read by its title: the graph's evidence is then
    # strong (that document, and what it links to), and hybrid search gives it more weight.
    names_documents: bool


class QuestionGraph(NamedTuple):
    """What the graph reads from the question alone: hybrid search reads it while the keyword ranking runs."""

    named: dict[uuid.UUID, float]  # the visible entities the question names, by specificity
    names_documents: bool
    reached: dict[uuid.UUID, float]  # the spread from `named` (`_spread`)
    via: dict[uuid.UUID, set[int]]


def question_graph(*, scope: SearchScope, query: str, model_id: str, scope_chunks: int = 0) -> QuestionGraph:
    """The entities the question names and the spread from them, for `graph_ranking(question=...)`."""
    named, names_documents = _question_entities(scope, query, model_id, scope_chunks)
    reached, via = _spread(scope, model_id, named, set(), scope_chunks) if named else ({}, {})
    return QuestionGraph(named, names_documents, reached, via)


def graph_ranking(
    *,
    scope: SearchScope,
    query: str,
    model_id: str,
    limit: int,
    seed_chunk_ids: list[int] | None = None,
    scope_chunks: int = 0,
    graph_evidence_only: bool = False,
    question: QuestionGraph | None = None,
) -> GraphRanking:
    """The `limit` best chunks by the graph: those whose document is, or whose text names, an entity reached.

    The seed chunks' documents are not ranked again for what they merely name: the rankings that
    chose them rank them already, and the graph's part is what they lead to.

    With `graph_evidence_only` (hybrid search, beside rankings that read each passage's own text), a
    passage is ranked only for what the graph adds: not for naming what the question names, nor for
    naming an entity the spread reached through that very passage (it named both ends of the relation:
    its own text's evidence). Counting those twice lifted passages with a claim's literal name above the
    one that answers (SciFact, docs/benchmarks.md). The documents a name is the title of, and the other
    passages it leads to, still count.

    `question`: `question_graph` of this scope and query, read beforehand (otherwise read here).
    """
    if question is None:
        question = question_graph(scope=scope, query=query, model_id=model_id, scope_chunks=scope_chunks)
    from_rankings = _ranking_entities(seed_chunk_ids or [], model_id)
    # Two spreads: what the question names reaches anything (a document the other rankings also
    # chose included); the other rankings' documents reach only other documents, never themselves.
    # A named entity a seed chunk is about spreads with the stronger of its two seeds.
    named = {pk: max(score, from_rankings.get(pk, 0.0)) for pk, score in question.named.items()}
    chosen = {pk: score for pk, score in from_rankings.items() if pk not in named}
    if not named and not chosen:
        return GraphRanking([], False)
    scores, via = _reached(scope, model_id, question, named=named, chosen=chosen, scope_chunks=scope_chunks)
    top = sorted(scores.items(), key=lambda item: -item[1])[:MAX_FRONTIER]
    if not top:
        return GraphRanking([], question.names_documents)
    # What a passage's mention of each entity counts: its whole score; with `graph_evidence_only`, what the
    # spread brought it (not the question's naming it), and nothing in the passages it was reached through.
    mentioned = [score - (named.get(pk, 0.0) if graph_evidence_only else 0.0) for pk, score in top]
    through = {str(pk): sorted(via[pk]) for pk, _ in top if via.get(pk)} if graph_evidence_only else {}
    rows = _entity_chunks(
        scope, model_id, top, mentioned=mentioned, through=through, seed_chunk_ids=seed_chunk_ids or [], limit=limit * 4
    )
    return GraphRanking(_decayed_hits(rows)[:limit], question.names_documents)


def _reached(
    scope: SearchScope,
    model_id: str,
    question: QuestionGraph,
    *,
    named: dict[uuid.UUID, float],
    chosen: dict[uuid.UUID, float],
    scope_chunks: int,
) -> tuple[dict[uuid.UUID, float], dict[uuid.UUID, set[int]]]:
    """The entities both spreads reach, their summed scores, and the chunks each was reached through."""
    # The question's spread as read beforehand, unless a seed chunk strengthened one of its names.
    spreads = [
        (question.reached, question.via) if named == question.named else _spread(scope, model_id, named, set(), scope_chunks)
    ]
    if chosen:
        spreads.append(_spread(scope, model_id, chosen, set(chosen), scope_chunks))
    scores: dict[uuid.UUID, float] = {}
    via: dict[uuid.UUID, set[int]] = {}
    for reached, reached_via in spreads:
        for pk, score in reached.items():
            scores[pk] = scores.get(pk, 0.0) + score
        for pk, chunks in reached_via.items():
            via.setdefault(pk, set()).update(chunks)
    return scores, via


def _entity_chunks(
    scope: SearchScope,
    model_id: str,
    top: list[tuple[uuid.UUID, float]],
    *,
    mentioned: list[float],
    through: dict[str, list[int]],
    seed_chunk_ids: list[int],
    limit: int,
) -> list[tuple[int, uuid.UUID, float]]:
    """The visible chunks about or naming the `top` entities, best first: (chunk id, document id, score)."""
    visible, visible_params = scope.named  # joined inline, as in `_spread`
    collections, collections_params = scope.collections_named
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""WITH s AS (
                    SELECT s.id, s.score, s.mentioned, coalesce(%(through)s::jsonb -> s.id::text, '[]') AS through,
                           {titled_document_visible("s.id", "%(model)s", f"({visible})")} AS title_ok
                    FROM unnest(%(ids)s::uuid[], %(scores)s::float8[], %(mentioned)s::float8[]) AS s(id, score, mentioned))
                SELECT c.chunk_id, c.document_id,
                       coalesce(sum(s.score) FILTER (WHERE c.subject), 0)
                       + %(mention)s * coalesce(max(least(s.mentioned, 1.0))
                                                FILTER (WHERE NOT c.subject AND NOT s.through @> to_jsonb(c.chunk_id)), 0) AS score
                FROM s, LATERAL (
                    SELECT m.chunk_id, m.document_id, m.subject FROM graph_mentions m
                    JOIN ({visible}) v ON v.id = m.document_id AND v.version = m.document_version
                    WHERE m.entity_id = s.id AND m.model_id = %(model)s AND m.collection_id = ANY(ARRAY({collections}))
                      AND {mention_counts("m", f"({visible})", title_visible="s.title_ok")}
                      AND (m.subject OR s.mentioned > 0)
                      AND (m.subject OR NOT m.document_id = ANY(ARRAY(SELECT document_id FROM document_embeddings WHERE id = ANY(%(seeds)s))))
                    ORDER BY m.subject DESC, m.count DESC, m.chunk_id LIMIT %(per_entity)s) c
                GROUP BY c.chunk_id, c.document_id HAVING bool_or(c.subject OR NOT s.through @> to_jsonb(c.chunk_id))
                ORDER BY score DESC, c.chunk_id LIMIT %(limit)s""",
            {
                **visible_params,
                **collections_params,
                "ids": [pk for pk, _ in top],
                "scores": [score for _, score in top],
                "mentioned": mentioned,
                "through": json.dumps(through),
                "mention": MENTION_FACTOR,
                "model": model_id,
                "seeds": seed_chunk_ids,
                "per_entity": CHUNKS_PER_ENTITY,
                "limit": limit,
            },
        )
        return cursor.fetchall()


def _decayed_hits(rows: list[tuple[int, uuid.UUID, float]]) -> list[Hit]:
    """Hits by score, a document's further chunks decayed.

    Every chunk of a document an entity names scores alike; the graph vouches for the document,
    so its first chunk takes the score and each further one half the one before.
    """
    seen: dict[uuid.UUID, int] = {}
    hits = []
    for chunk_id, document_id, score in rows:
        seen[document_id] = seen.get(document_id, -1) + 1
        decayed = float(score) * SAME_DOCUMENT_DECAY ** seen[document_id]
        # A question-named entity's own chunks score 1 or more; one hop away about HOP_DECAY, two hops its square.
        hits.append(Hit(chunk_id=chunk_id, score=decayed, relevance=min(1.0, decayed)))
    hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
    return hits
