"""Vector ranking: cosine similarity to the query over the scope's chunks, exact or through HNSW.

Which of the two to use depends on the scope actually searched (a collection, a document, the
viewer's visible set), not on the team: an exact scan reads every chunk of the scope; an HNSW walk
reads about `ef_search` index entries, or, when the scope is a small share of the model's index
(every team's chunks), `limit / share` entries before enough of them are in scope (pgvector's
iterative scan). Each walked entry costs a few times an exactly scanned row (the graph's neighbours
are compared too). And a walk through a narrow share finds the scope's nearest chunks badly: on the
scoped benchmark, recall@10 against exact was 0.99 at 30% of the index, 0.96 at 10%, 0.72 at 3%
(docs/benchmarks.md). So a narrow scope is scanned exactly (up to a cap), and a wide one walked
when that reads less. A walk that still comes back short (a scope whose chunks all lie far from
the query) is finished by an exact scan: a page is never short while the scope has chunks to fill it.
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.db import connection, transaction

from rag.retrieval.hits import Hit
from rag.retrieval.query import vector_literal
from rag.retrieval.vector_index import vector_expression
from rag.retrieval.visibility import SearchScope

Path = Literal["exact", "hnsw"]
# What one walked HNSW entry costs against one exactly scanned chunk (neighbour distances and a
# heap fetch against a heap fetch and one distance): measured 4-6 on the scoped benchmark
# (bench/scoped.py, docs/benchmarks.md).
HNSW_STEP_COST = 5
# Iterative scans start from this many candidates (or four times the page): a wide list keeps recall
# when few neighbours are in scope (ef_search 100 gave recall@10 0.86 for a user seeing 10% of 100k
# chunks, 400 gave 0.96: docs/benchmarks.md).
EF_SEARCH = 400
# Below this share of the index a filtered walk loses recall; such scopes are scanned exactly up to
# EXACT_SCAN_CAP chunks (about 50-100 ms on two busy cores), walked beyond it.
MIN_WALK_SHARE = 0.05
EXACT_SCAN_CAP = 10_000
# Bounds of hnsw.max_scan_tuples: a walk may go this many times further than expected before the
# exact scan takes over, never beyond the hard cap.
WALK_SLACK = 4
MAX_SCAN_TUPLES = 50_000


# A larger index needs a wider list for the same recall: at least one candidate per this many chunks of
# the model's index (a walk filtered to 10% of 1M chunks: recall@10 0.73 with 400, 0.84 with 1000 over
# 60 queries, at the same latency; docs/benchmarks.md, issue 17, ninth session). 1000 is pgvector's maximum.
CHUNKS_PER_CANDIDATE = 1000


def ef_search(limit: int, model_chunks: int) -> int:
    return min(1000, max(EF_SEARCH, 4 * limit, model_chunks // CHUNKS_PER_CANDIDATE))


def walk_rows(limit: int) -> int:
    """Chunks of the scope an HNSW walk gathers before it keeps the best `limit` (RAG_HNSW_WALK_ROWS, at least `limit`)."""
    return max(limit, settings.RAG_HNSW_WALK_ROWS)


def expected_walk(*, limit: int, scope_chunks: int, model_chunks: int) -> int:
    """Index entries an iterative HNSW scan reads before `limit` of them are in a scope of `scope_chunks`."""
    share = min(1.0, max(scope_chunks, 1) / max(model_chunks, 1))
    return max(ef_search(limit, model_chunks), int(limit / share))


def choose_path(*, limit: int, scope_chunks: int, model_chunks: int) -> Path:
    """Exact when the scope is small, a narrow share of the index, or cheaper to read than to walk to."""
    if scope_chunks <= settings.RAG_EXACT_SEARCH_MAX_CHUNKS:
        return "exact"
    if scope_chunks < MIN_WALK_SHARE * model_chunks and scope_chunks <= EXACT_SCAN_CAP:
        return "exact"
    walk = expected_walk(limit=walk_rows(limit), scope_chunks=scope_chunks, model_chunks=model_chunks)
    return "exact" if scope_chunks <= HNSW_STEP_COST * walk else "hnsw"


def vector_ranking(
    *,
    scope: SearchScope,
    vector: list[float],
    model_id: str,
    dimension: int,
    limit: int,
    threshold: float,
    scope_chunks: int,
    model_chunks: int = 0,
    path: Path | None = None,
) -> list[Hit]:
    """The `limit` nearest chunks of the scope scoring at least `threshold`.

    `scope_chunks` (the scope's chunks) and `model_chunks` (the model's whole index) choose the path
    unless `path` names one.
    """
    path = path or choose_path(limit=limit, scope_chunks=scope_chunks, model_chunks=model_chunks)
    literal = vector_literal(vector)
    rows = None
    if path == "hnsw":
        gather = walk_rows(limit)
        walk = expected_walk(limit=gather, scope_chunks=scope_chunks, model_chunks=model_chunks)
        ef = ef_search(limit, model_chunks)
        rows = _walk(scope, literal, model_id=model_id, dimension=dimension, limit=limit, gather=gather, walk=walk, ef=ef)
        if len(rows) < min(limit, scope_chunks):
            rows = None  # the walk gave up before the page was full: scan the scope instead
    if rows is None:
        rows = _scan(scope, literal, model_id=model_id, limit=limit)
    return [
        Hit(
            chunk_id=r[0],
            document_id=r[1],
            chunk_index=r[2],
            start=r[3],
            end=r[4],
            version=r[5],
            score=float(r[6]),
            relevance=max(0.0, float(r[6])),
        )
        for r in rows
        if r[6] >= threshold
    ]


def vector_relevances(*, vector: list[float], chunk_ids: list[int], model_id: str, threshold: float) -> dict[int, float]:
    """The cosine of chunks the vector ranking did not return (found by another ranking), at least `threshold`.

    Hybrid fusion averages each candidate's relevances: a chunk that only fell below this ranking's
    cut keeps its real similarity instead of 0. The caller passes only chunks of visible documents
    (other rankings' hits); each is read by primary key.
    """
    if not chunk_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) FROM document_embeddings WHERE id = ANY(%s) AND model_id = %s",
            [vector_literal(vector), chunk_ids, model_id],
        )
        rows = cursor.fetchall()
    return {chunk_id: max(0.0, float(score)) for chunk_id, score in rows if score >= threshold}


# Both rank the same columns; the caller applies the threshold, so a short list means a short walk.
_COLUMNS = "e.id, e.document_id, e.chunk_index, e.start_offset, e.end_offset, e.document_version"


def _scan(scope: SearchScope, literal: str, *, model_id: str, limit: int) -> list[tuple]:
    """Exact: every chunk of the scope's documents, found through the (document, ...) index.

    The distance is an expression other than the indexed one, so the planner cannot walk HNSW. The
    chunks' narrow columns and distance are materialised before the join with the scope: joined
    first, the planner would hash whole rows, vectors included (a spill to disk past a few thousand).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v AS MATERIALIZED ({scope.whole_sql}),"
            f" c AS MATERIALIZED (SELECT {_COLUMNS}, e.embedding <=> %s::vector AS distance"
            f"   FROM document_embeddings e WHERE e.model_id = %s AND e.document_id = ANY(ARRAY(SELECT id FROM v)))"
            f" SELECT c.id, c.document_id, c.chunk_index, c.start_offset, c.end_offset, c.document_version, 1 - c.distance"
            f" FROM c JOIN v ON v.id = c.document_id AND v.version = c.document_version"
            f" ORDER BY c.distance, c.id LIMIT %s",
            [*scope.whole_params, literal, model_id, limit],
        )
        return cursor.fetchall()


def _walk(
    scope: SearchScope, literal: str, *, model_id: str, dimension: int, limit: int, gather: int, walk: int, ef: int
) -> list[tuple]:
    """Through the model's HNSW index, with an iterative scan that walks on until `gather` rows are in scope;
    the best `limit` of them.

    Relaxed order (strict order costs more and gains nothing: the rows are sorted again outside the
    materialised CTE). The walk is bounded to a few times what the scope's share predicts, so a scope
    whose chunks are far from the query costs a bounded walk and then an exact scan, not a crawl.
    """
    distance = f"({vector_expression(dimension, 'e')} <=> %s::vector({int(dimension)}))"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [ef])
        cursor.execute("SET LOCAL hnsw.max_scan_tuples = %s", [min(MAX_SCAN_TUPLES, max(2 * ef, WALK_SLACK * walk))])
        # The path is chosen above from the counted scope: the planner, estimating the scope's size
        # from statistics, could otherwise sort the scope's chunks itself (a slow exact scan of a
        # wide scope). A sort costs it more than the index walk this way.
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(
            f"WITH v AS ({scope.sql}), ranked AS MATERIALIZED ("
            f"  SELECT {_COLUMNS}, 1 - {distance} AS score"
            f"  FROM document_embeddings e JOIN v ON v.id = e.document_id AND v.version = e.document_version"
            f"  WHERE e.model_id = %s ORDER BY {distance} LIMIT %s"
            f") SELECT * FROM ranked ORDER BY score DESC, id LIMIT %s",
            [*scope.params, literal, model_id, literal, gather, limit],
        )
        return cursor.fetchall()
