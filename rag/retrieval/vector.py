"""Vector ranking: cosine similarity to the query over the scope's chunks, exact, by sign bits, or through HNSW.

Which to use depends on the scope actually searched (a collection, a document, the viewer's visible
set), not on the team. An exact scan reads every chunk of the scope, vector and all. A sign-bit scan
reads the scope's rows of one narrow covering index (one bit per dimension, chunk_sign_bits) and
reranks the nearest few hundred by their full vectors: a tenth of an exact scan's cost per chunk, and
it misses almost nothing. An HNSW walk reads about `ef_search` index entries, or, when the scope is a
small share of the model's index (every team's chunks), `limit / share` entries before enough of them
are in scope (pgvector's iterative scan); each walked entry costs a few times an exactly scanned row.
A walk through a narrow share finds the scope's nearest chunks badly (recall@10 against exact 0.96 at
10% of 100k chunks, 0.72 at 3%, 0.80 at 10% of 1M: docs/benchmarks.md), so a scope under a quarter of
the index is scanned by its sign bits, and a wide one walked when that reads less. A walk that still
comes back short (a scope whose chunks all lie far from the query) is finished by an exact scan: a
page is never short while the scope has chunks to fill it.

With the milvus backend (RAG_VECTOR_BACKEND=milvus) a scope above the exact scan's size is ranked by Milvus
instead: the scope goes as a filter expression (visibility.milvus_expression), and every chunk Milvus returns is
checked again against the visible documents, in SQL, before it counts (its score read from PostgreSQL's vector).
A page the check leaves short asks Milvus for more, and one Milvus cannot fill (its copy behind the outbox) is
finished by the exact scan too, and one Milvus does not answer is ranked in PostgreSQL as without it.
"""

from __future__ import annotations

import logging
from typing import Literal

from django.conf import settings
from django.db import transaction

from config.replicas import read_connection
from rag.corpus import milvus
from rag.corpus.vector_index import vector_expression
from rag.retrieval.hits import Hit
from rag.retrieval.query import vector_literal
from rag.retrieval.visibility import SearchScope, milvus_expression

logger = logging.getLogger("rag.search")

Path = Literal["exact", "signs", "hnsw", "milvus"]
# What one walked HNSW entry costs against one exactly scanned chunk (neighbour distances and a
# heap fetch against a heap fetch and one distance): measured 4-6 on the scoped benchmark
# (bench/scoped.py, docs/benchmarks.md).
HNSW_STEP_COST = 5
# What one chunk's sign bits cost against one exactly scanned chunk (an index tuple and a Hamming
# distance against a heap row and a cosine): 0.4 µs against 3.8 µs a row at 1M chunks, 10% visible
# (bench/latency.py).
SIGN_ROW_COST = 0.1
# The sign bits' nearest share of the scope (at least SIGN_RERANK_MIN, and this many per hit on the page)
# are reranked by their full vectors: the more chunks, the more of them tie with the nearest on Hamming
# distance. Recall@10 against exact for a reader who sees 10%: 0.96 reranking 200 of their 10k chunks of
# 100k (6.6 ms; a walk's 0.96 in 6.5), 0.93 / 0.965 / 0.98 reranking 200 / 400 / 800 of their 100k of 1M
# (bench/latency.py).
SIGN_RERANK_SHARE = 1 / 250
SIGN_RERANK_MIN = 200
SIGN_RERANK_PER_HIT = 4
# How many of the readable collections' nearest rows are checked first against the visible documents, per row
# to rerank (more only when fewer of those are visible).
SIGN_PREFILTER = 5
# Those rows are sorted only within the distance that keeps SIGN_CUTOFF_MARGIN times their share of the scope in
# a sample of SIGN_CUTOFF_SAMPLE of its readable rows (at 100k rows the sort held 2,000-4,500 rows instead of
# 100,000, and the pass fell 52 -> 25 ms; bench/latency.py);
# none when that share is SIGN_CUTOFF_MAX_SHARE or more (a small scope: the sample would cost what it saves).
SIGN_CUTOFF_SAMPLE = 5_000
SIGN_CUTOFF_MARGIN = 2.0
SIGN_CUTOFF_MAX_SHARE = 0.5
# Below RAG_SIGN_BITS_MAX_SHARE of the index (a quarter by default) a filtered walk loses recall (0.80 at
# 10% of 1M chunks): such scopes are scanned by their sign bits, up to SIGN_SCAN_CAP chunks (about 100 ms
# on two cores), walked beyond it.
SIGN_SCAN_CAP = 250_000
# Iterative scans start from this many candidates (or four times the page): a wide list keeps recall
# when few neighbours are in scope (ef_search 100 gave recall@10 0.86 for a user seeing 10% of 100k
# chunks, 400 gave 0.96: docs/benchmarks.md).
EF_SEARCH = 400
# Bounds of hnsw.max_scan_tuples: a walk may go this many times further than expected before the
# exact scan takes over, never beyond the hard cap.
WALK_SLACK = 4
MAX_SCAN_TUPLES = 50_000


# A larger index needs a wider list for the same recall: at least one candidate per this many chunks of
# the model's index (a walk filtered to 10% of 1M chunks: recall@10 0.73 with 400, 0.84 with 1000 over
# 60 queries, at the same latency; bench/latency.py). 1000 is pgvector's maximum.
CHUNKS_PER_CANDIDATE = 1000


def ef_search(limit: int, model_chunks: int) -> int:
    return min(1000, max(EF_SEARCH, 4 * limit, model_chunks // CHUNKS_PER_CANDIDATE))


def walk_rows(limit: int) -> int:
    """Chunks of the scope an HNSW walk gathers before it keeps the best `limit` (RAG_HNSW_WALK_ROWS, at least `limit`)."""
    return max(limit, settings.RAG_HNSW_WALK_ROWS)


def rerank_depth(limit: int, scope_chunks: int) -> int:
    """Chunks nearest by their sign bits that a sign-bit scan reranks by their full vectors."""
    return max(SIGN_RERANK_MIN, SIGN_RERANK_PER_HIT * limit, int(scope_chunks * SIGN_RERANK_SHARE))


def expected_walk(*, limit: int, scope_chunks: int, model_chunks: int) -> int:
    """Index entries an iterative HNSW scan reads before `limit` of them are in a scope of `scope_chunks`."""
    share = min(1.0, max(scope_chunks, 1) / max(model_chunks, 1))
    return max(ef_search(limit, model_chunks), int(limit / share))


def choose_path(*, limit: int, scope_chunks: int, model_chunks: int, in_milvus: bool | None = None) -> Path:
    """Exact when the scope is small; Milvus with the milvus backend (`in_milvus`, by default the setting's); by
    sign bits when it is a narrow share of the index (a walk would miss) or they read less than a walk; otherwise
    a walk. Costs in exactly scanned chunks."""
    if scope_chunks <= settings.RAG_EXACT_SEARCH_MAX_CHUNKS:
        return "exact"
    if milvus.milvus_enabled() if in_milvus is None else in_milvus:
        return "milvus"
    walk = HNSW_STEP_COST * expected_walk(limit=walk_rows(limit), scope_chunks=scope_chunks, model_chunks=model_chunks)
    if not settings.RAG_SIGN_BITS_MAX_SHARE or scope_chunks > SIGN_SCAN_CAP:
        return "exact" if scope_chunks <= walk else "hnsw"  # no sign bits: the scan or the walk, whichever reads less
    signs = SIGN_ROW_COST * scope_chunks + rerank_depth(limit, scope_chunks)
    if scope_chunks <= signs:
        return "exact"
    if scope_chunks < settings.RAG_SIGN_BITS_MAX_SHARE * model_chunks:
        return "signs"
    return "signs" if signs <= walk else "hnsw"


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
    elif path == "signs":
        depth = rerank_depth(limit, scope_chunks)
        rows = _signs(scope, literal, model_id=model_id, limit=limit, depth=depth, scope_chunks=scope_chunks)
    elif path == "milvus":
        try:
            rows = _milvus(scope, vector, literal, model_id=model_id, dimension=dimension, limit=limit, model_chunks=model_chunks)
        except milvus.MilvusUnavailable as exc:
            # PostgreSQL still holds every vector (and its HNSW index and sign bits): slower, never wrong.
            logger.warning("vector search in PostgreSQL: Milvus did not answer (%s)", exc)
            path = choose_path(limit=limit, scope_chunks=scope_chunks, model_chunks=model_chunks, in_milvus=False)
            return vector_ranking(
                scope=scope,
                vector=vector,
                model_id=model_id,
                dimension=dimension,
                limit=limit,
                threshold=threshold,
                scope_chunks=scope_chunks,
                model_chunks=model_chunks,
                path=path,
            )
    if rows is not None and len(rows) < min(limit, scope_chunks):
        rows = None  # the walk gave up before the page was full (or a chunk had no sign bits): scan the scope instead
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


def vector_similarities(*, vector: list[float], chunk_ids: list[int], model_id: str) -> dict[int, float]:
    """The cosine similarity of each chunk to `vector`, read by primary key.

    The caller passes only chunks of visible documents (hits of a ranking that filtered by the scope).
    """
    if not chunk_ids:
        return {}
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) FROM document_embeddings WHERE id = ANY(%s) AND model_id = %s",
            [vector_literal(vector), chunk_ids, model_id],
        )
        return {chunk_id: float(similarity) for chunk_id, similarity in cursor.fetchall()}


def vector_relevances(*, vector: list[float], chunk_ids: list[int], model_id: str, threshold: float) -> dict[int, float]:
    """The cosine of chunks the vector ranking did not return (found by another ranking), at least `threshold`.

    Hybrid fusion averages each candidate's relevances: a chunk that only fell below this ranking's
    cut keeps its real similarity instead of 0.
    """
    similarities = vector_similarities(vector=vector, chunk_ids=chunk_ids, model_id=model_id)
    return {chunk_id: max(0.0, score) for chunk_id, score in similarities.items() if score >= threshold}


# Both rank the same columns; the caller applies the threshold, so a short list means a short walk.
_COLUMNS = "e.id, e.document_id, e.chunk_index, e.start_offset, e.end_offset, e.document_version"


def _scan(scope: SearchScope, literal: str, *, model_id: str, limit: int) -> list[tuple]:
    """Exact: every chunk of the scope's documents, found through the (document, ...) index.

    The distance is an expression other than the indexed one, so the planner cannot walk HNSW. The
    chunks' narrow columns and distance are materialised before the join with the scope: joined
    first, the planner would hash whole rows, vectors included (a spill to disk past a few thousand).
    """
    with read_connection().cursor() as cursor:
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


def _signs(scope: SearchScope, literal: str, *, model_id: str, limit: int, depth: int, scope_chunks: int) -> list[tuple]:
    """The scope's `depth` chunks nearest by the signs of their vectors (Hamming distance), reranked by their full
    vectors: the best `limit`.

    The sign bits come from one covering index (chunk_sign_bits, 48 bytes for 384 dimensions), read only for the
    collections the visible documents can be in. Joining every one of those rows with the visible documents costs
    more than reading them, so the nearest `SIGN_PREFILTER` × `depth` rows of those collections are checked first,
    each by its document's primary key: when `depth` of them are visible, they are exactly the visible rows'
    nearest (any row outside lies no nearer), else the whole scope is joined. Only the `depth` rows read by primary
    key carry a full vector.

    Sorting every row for the nearest few thousand cost more than reading them (at 100k rows, 52 ms against 18
    to read them and their distances). So a sample of the rows (the first of each collection in the index,
    unrelated to their vectors) sets a distance few more than the rows wanted lie within, and only those are
    sorted. The pass is exact whenever `depth` visible rows lie within it (none outside is nearer); a sample
    that set it too tight (fewer than wanted within) is followed by the pass without it.
    """
    prefilter = SIGN_PREFILTER * depth
    # The sample's share the cutoff keeps: what the wanted rows are of the scope, with a margin (the readable
    # collections hold at least the scope's chunks, so the share errs wide).
    share = SIGN_CUTOFF_MARGIN * prefilter / max(scope_chunks, 1)
    cutoff: float | None = share if share < SIGN_CUTOFF_MAX_SHARE else None
    bound: int | None = prefilter
    while True:
        rows = _sign_pass(scope, literal, model_id=model_id, limit=limit, depth=depth, bound=bound, cutoff=cutoff)
        # No row at all: none of the nearest was visible (or there is nothing to read): join the whole scope.
        if bound is None or (rows and rows[0][-2] >= depth):
            break  # enough visible among the nearest: exactly the visible rows' nearest
        read_all = bool(rows) and rows[0][-1] < bound  # fewer rows than the bound within reach
        if read_all and cutoff is None:
            break  # every readable row was read
        # A cutoff that kept fewer rows than the bound was too tight: the same pass without it; otherwise the
        # bound itself kept too few visible rows: the whole scope.
        bound = prefilter if read_all and cutoff is not None else None
        cutoff = None
    return [row[:-2] for row in rows]


# The distance within which the `share` of a sample of the readable rows lies: the first rows of each collection
# in the index (in no order of their vectors), about SIGN_CUTOFF_SAMPLE in all. None beyond the sample's last.
_SIGN_SAMPLE = """
 sample AS MATERIALIZED (
  SELECT x.distance FROM cols, LATERAL (
   SELECT s.bits <~> (SELECT bits FROM q) AS distance FROM chunk_sign_bits s
   WHERE s.model_id = %(model)s AND s.collection_id = cols.id
   LIMIT (SELECT ceil(%(sample)s::float8 / count(*))::int FROM cols)) x),
 cutoff AS (SELECT coalesce((
  SELECT distance FROM sample ORDER BY distance
  OFFSET (SELECT floor(%(share)s::float8 * count(*))::int FROM sample) LIMIT 1), 'Infinity'::float8) AS distance),"""


def _sign_pass(
    scope: SearchScope, literal: str, *, model_id: str, limit: int, depth: int, bound: int | None, cutoff: float | None
) -> list[tuple]:
    """One pass of `_signs`: the nearest `bound` readable rows (all with None), within the distance that keeps the
    `cutoff` share of a sample (no such limit with None), joined with the visible documents; their `depth`
    nearest reranked. Each row ends with the counts of the visible rows and of the readable rows read."""
    sample, within = "", ""
    params: dict = {"q": literal, "model": model_id, "bound": bound, "depth": depth, "limit": limit}
    if cutoff is not None:
        sample = _SIGN_SAMPLE
        within = " AND s.bits <~> (SELECT bits FROM q) <= (SELECT distance FROM cutoff)"
        params |= {"sample": SIGN_CUTOFF_SAMPLE, "share": cutoff}
    if bound is None:
        # Every readable row: joined with the whole visible set, read first.
        visible, visible_params = scope.whole_named
        ctes = f"v AS MATERIALIZED ({visible}), cols AS MATERIALIZED (SELECT DISTINCT collection_id AS id FROM v),"
        is_visible = "JOIN v ON v.id = r.document_id AND v.version = r.document_version"
    else:
        # A few thousand rows: each checked by its document's primary key (OFFSET 0 keeps the check per row), the
        # collections read from the few the viewer's documents can be in. Reading the whole visible set first cost
        # more than the rows' checks (45,688 documents at 10% of 1M chunks).
        visible, visible_params = scope.named
        collections, collections_params = scope.collections_named
        visible_params = {**visible_params, **collections_params}
        ctes = f"cols(id) AS MATERIALIZED ({collections}),"
        is_visible = (
            f"WHERE EXISTS (SELECT FROM ({visible}) v WHERE v.id = r.document_id AND v.version = r.document_version OFFSET 0)"
        )
    reads = read_connection()
    with transaction.atomic(using=reads.alias), reads.cursor() as cursor:
        # The collections' share of the table is unknown when the statement is planned (they come from the
        # viewer's access): the planner, guessing most of it, would read the whole table instead of the index.
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Parallel workers made it slower (p50 46 against 40 ms at 1M chunks, 10% visible), and in hybrid
        # search they take the cores the keyword ranking runs on beside it.
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        cursor.execute(
            f"WITH {ctes}"
            f" q AS MATERIALIZED (SELECT binary_quantize(%(q)s::vector) AS bits),{sample}"
            f" readable AS MATERIALIZED ("
            f"  SELECT s.chunk_id, s.document_id, s.document_version, s.bits <~> (SELECT bits FROM q) AS distance"
            f"  FROM chunk_sign_bits s"
            f"  WHERE s.model_id = %(model)s AND s.collection_id = ANY(ARRAY(SELECT id FROM cols)){within}"
            f"  ORDER BY distance, s.chunk_id LIMIT %(bound)s),"
            f" near AS MATERIALIZED ("
            f"  SELECT r.chunk_id FROM readable r {is_visible}"
            f"  ORDER BY r.distance, r.chunk_id LIMIT %(depth)s)"
            f" SELECT {_COLUMNS}, 1 - (e.embedding <=> %(q)s::vector) AS score,"
            f"  (SELECT count(*) FROM near), (SELECT count(*) FROM readable)"
            f" FROM document_embeddings e WHERE e.id = ANY(ARRAY(SELECT chunk_id FROM near))"
            f" ORDER BY score DESC, e.id LIMIT %(limit)s",
            {**visible_params, **params},
        )
        return cursor.fetchall()


# Milvus is first asked for this many times the page (at least MILVUS_MIN_CANDIDATES), then four times more each
# round while the check against the visible documents leaves the page short, up to Milvus's top-k limit.
MILVUS_OVERFETCH = 2
MILVUS_MIN_CANDIDATES = 50
MILVUS_GROWTH = 4


def _milvus(
    scope: SearchScope, vector: list[float], literal: str, *, model_id: str, dimension: int, limit: int, model_chunks: int
) -> list[tuple]:
    """The scope's nearest `limit` chunks through Milvus, each checked against the visible documents in SQL.

    Milvus filters by the scope's expression (team, collections, documents: ids only, read from PostgreSQL at
    this request). Its copy may lag (the outbox) or hold fields a permission change has made too wide: the
    check is what decides. Candidates the check drops leave the page short: Milvus is asked for more, until the
    page is full or Milvus has no more matching rows.
    """
    expression = milvus_expression(scope)
    if expression is None:
        return []
    want = max(MILVUS_MIN_CANDIDATES, MILVUS_OVERFETCH * limit)
    checked: set[int] = set()
    rows: list[tuple] = []
    while True:
        found = milvus.search(
            model_id=model_id,
            dimension=dimension,
            vector=vector,
            expression=expression,
            limit=want,
            ef=ef_search(want, model_chunks),
        )
        fresh = [hit.chunk_id for hit in found if hit.chunk_id not in checked]
        checked.update(fresh)
        rows.extend(_visible_rows(scope, literal, model_id=model_id, chunk_ids=fresh))
        if len(rows) >= limit or len(found) < want or want >= milvus.MAX_TOP_K:
            break
        want = min(milvus.MAX_TOP_K, want * MILVUS_GROWTH)
    rows.sort(key=lambda row: (-row[6], row[0]))
    return rows[:limit]


def _visible_rows(scope: SearchScope, literal: str, *, model_id: str, chunk_ids: list[int]) -> list[tuple]:
    """Those of `chunk_ids` that are chunks of `model_id` of a visible document at its current version, scored."""
    if not chunk_ids:
        return []
    visible, params = scope.named
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"SELECT {_COLUMNS}, 1 - (e.embedding <=> %(q)s::vector) FROM document_embeddings e"
            f" WHERE e.id = ANY(%(ids)s) AND e.model_id = %(model)s"
            f" AND EXISTS (SELECT FROM ({visible}) v WHERE v.id = e.document_id AND v.version = e.document_version OFFSET 0)",
            {**params, "q": literal, "ids": chunk_ids, "model": model_id},
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
    reads = read_connection()
    with transaction.atomic(using=reads.alias), reads.cursor() as cursor:
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
