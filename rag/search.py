"""Permission-filtered search: vector, keyword (BM25) and hybrid (weighted RRF).

The visibility filter is inside every ranking query: ranking starts from the viewer's
visible documents, so a page is full whenever enough visible matches exist.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection, transaction

from config.errors import EmbeddingUnavailable, NoEmbeddings
from documents.models import Document
from documents.selectors import collection_get, document_get
from permissions.models import User
from rag.fusion import max_rrf_score, reciprocal_rank_fusion
from rag.keyword import keyword_search_sql
from rag.models import DocumentEmbedding
from rag.providers import EmbeddingError, get_embedding_provider
from rag.vector_index import vector_expression

logger = logging.getLogger("rag.search")

MODES = ("vector", "keyword", "hybrid")
# Hybrid fuses this many candidates from each ranking (or more for large limits).
HYBRID_CANDIDATES = 50
QUERY_CACHE_SECONDS = 24 * 3600
STATS_CACHE_SECONDS = 60


@dataclass
class Hit:
    chunk_id: int
    score: float
    document_id: uuid.UUID | None = None
    chunk_index: int = 0
    text: str = ""
    start: int = 0
    end: int = 0
    version: int = 0


@dataclass
class SearchResult:
    hits: list[Hit]
    documents: dict[uuid.UUID, Document]
    latency: dict[str, float] = field(default_factory=dict)


def normalise_query(query: str) -> str:
    return " ".join(query.split()).lower()


def embed_query(query: str) -> list[float]:
    """The query's embedding, cached by model and normalised query."""
    provider = get_embedding_provider()
    key = "rag:q:" + hashlib.sha256(f"{provider.model_id}\x00{normalise_query(query)}".encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return np.frombuffer(cached, dtype=np.float32).tolist()
    try:
        vector = provider.embed_query(query)
    except EmbeddingError as exc:
        raise EmbeddingUnavailable(f"The embedding provider is unavailable: {exc}") from exc
    cache.set(key, np.asarray(vector, dtype=np.float32).tobytes(), QUERY_CACHE_SECONDS)
    return vector


def _visible_sql(user: User, *, collection_id=None, document_id=None) -> tuple[str, tuple]:
    """SQL selecting (id, version) of the documents the user may see: the one access policy."""
    qs = Document.objects.visible_to(user)
    if collection_id is not None:
        qs = qs.filter(collection_id=collection_id)
    if document_id is not None:
        qs = qs.filter(pk=document_id)
    sql, params = qs.order_by().values("id", "version").query.sql_with_params()
    return sql, params


@dataclass(frozen=True)
class IndexStats:
    """The viewer's visible chunks of one model: how many, and their total keyword length."""

    chunks: int
    keyword_length: int


def visible_index_stats(*, user: User, model_id: str, collection_id=None, document_id=None) -> IndexStats:
    """Counted from the narrow per-document status rows (written with the chunks, in one transaction).

    These numbers only steer ranking (exact scan or HNSW; BM25's N and average length); the
    ranking queries themselves filter by visibility. So they are cached for a short while per
    viewer and scope: a stale figure can cost a little speed or score precision, never access.
    """
    key = f"rag:stats:{model_id}:{user.pk}:{collection_id}:{document_id}"
    cached = cache.get(key)
    if cached is not None:
        return IndexStats(*cached)
    visible, visible_params = _visible_sql(user, collection_id=collection_id, document_id=document_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v AS ({visible}) SELECT coalesce(sum(s.chunk_count), 0), coalesce(sum(s.keyword_length), 0) "
            "FROM document_index_status s JOIN v ON v.id = s.document_id AND v.version = s.indexed_version "
            "WHERE s.model_id = %s AND s.document_id = ANY(ARRAY(SELECT id FROM v))",
            [*visible_params, model_id],
        )
        chunks, keyword_length = cursor.fetchone()
    stats = IndexStats(int(chunks), int(keyword_length))
    cache.set(key, (stats.chunks, stats.keyword_length), STATS_CACHE_SECONDS)
    return stats


def vector_ranking(*, user: User, vector: list[float], model_id: str, dimension: int, limit: int,
                   threshold: float, collection_id=None, document_id=None) -> list[Hit]:
    visible, visible_params = _visible_sql(user, collection_id=collection_id, document_id=document_id)
    vector_literal = "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
    # How many chunks the viewer can see decides exact scan or HNSW.
    visible_chunks = visible_index_stats(user=user, model_id=model_id, collection_id=collection_id, document_id=document_id).chunks
    with transaction.atomic(), connection.cursor() as cursor:
        if visible_chunks <= settings.RAG_EXACT_SEARCH_MAX_CHUNKS:
            # An expression other than the indexed one: the planner scans exactly, and only the
            # visible documents' chunks, found through the (document, ...) index. (Referenced twice,
            # the CTE v is computed once; on the HNSW path it is inlined and the index scan drives.)
            distance = "(e.embedding <=> %s::vector)"
            narrow = "AND e.document_id = ANY(ARRAY(SELECT id FROM v))"
        else:
            narrow = ""
            distance = f"({vector_expression(dimension, 'e')} <=> %s::vector({int(dimension)}))"
            # Iterative scans keep walking the graph until `limit` rows pass the filter. A wide
            # candidate list keeps recall when few neighbours are visible (ef_search 100 gave
            # recall@10 0.86 for a user seeing 10% of 100k chunks, 400 gave 0.96: docs/benchmarks.md).
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cursor.execute("SET LOCAL hnsw.ef_search = %s", [min(1000, max(400, 4 * limit))])
            cursor.execute("SET LOCAL hnsw.max_scan_tuples = 50000")
        cursor.execute(
            f"WITH v AS ({visible}), ranked AS MATERIALIZED ("
            f"  SELECT e.id, e.document_id, e.chunk_index, e.start_offset, e.end_offset, e.document_version,"
            f"         1 - {distance} AS score"
            f"  FROM document_embeddings e JOIN v ON v.id = e.document_id AND v.version = e.document_version"
            f"  WHERE e.model_id = %s {narrow} ORDER BY {distance} LIMIT %s"
            f") SELECT * FROM ranked WHERE score >= %s ORDER BY score DESC, id",
            [*visible_params, vector_literal, model_id, vector_literal, limit, threshold],
        )
        rows = cursor.fetchall()
    return [Hit(chunk_id=r[0], document_id=r[1], chunk_index=r[2], start=r[3], end=r[4], version=r[5], score=float(r[6])) for r in rows]


def keyword_ranking(*, user: User, query: str, model_id: str, limit: int, collection_id=None, document_id=None) -> list[Hit]:
    visible, visible_params = _visible_sql(user, collection_id=collection_id, document_id=document_id)
    stats = visible_index_stats(user=user, model_id=model_id, collection_id=collection_id, document_id=document_id)
    sql, params = keyword_search_sql(
        visible_documents_sql=visible, visible_params=list(visible_params), model_id=model_id, query=query, limit=limit,
        chunks=stats.chunks, keyword_length=stats.keyword_length,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [Hit(chunk_id=r[0], score=float(r[1])) for r in rows]


_executor: ThreadPoolExecutor | None = None
_executor_pid = 0


def _background(fn, /, **kwargs) -> Future:
    """Run `fn` on one of this process's search threads, on that thread's own database connection.

    A pool per process (gunicorn forks after --preload). Threads start only when requests overlap
    (a sync worker uses one; gthread workers up to their thread count), each with its connection.
    """
    global _executor, _executor_pid
    if _executor is None or _executor_pid != os.getpid():
        _executor, _executor_pid = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rag-search"), os.getpid()

    def run():
        # No request signals on this thread: honour CONN_MAX_AGE and drop broken connections here.
        close_old_connections()
        started = time.perf_counter()
        return fn(**kwargs), round((time.perf_counter() - started) * 1000, 2)

    return _executor.submit(run)


def close_background_connections() -> None:
    """Close the search threads' database connections (a test dropping its database needs this)."""
    if _executor is None or _executor_pid != os.getpid():
        return
    # One close per thread: each task holds its thread at the barrier until all have one.
    threads = len(_executor._threads)  # noqa: SLF001 (ThreadPoolExecutor has no public count)
    barrier = threading.Barrier(threads)

    def close():
        barrier.wait(timeout=10)
        connection.close()

    for future in [_executor.submit(close) for _ in range(threads)]:
        future.result()


def _can_overlap() -> bool:
    """A second connection cannot see this one's uncommitted writes: overlap only outside transactions."""
    return settings.RAG_CONCURRENT_SEARCH and not connection.in_atomic_block


def search(*, user: User, query: str, limit: int = 10, threshold: float | None = None, mode: str = "hybrid",
           collection_id=None, document_id=None, weights: tuple[float, float] | None = None) -> SearchResult:
    """Rank the chunks of the user's visible documents for `query`."""
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
    if document_id is not None:
        document_get(user=user, document_id=document_id, include_archived=False)
    threshold = settings.RAG_SIMILARITY_THRESHOLD if threshold is None else threshold
    weights = weights or settings.RAG_HYBRID_WEIGHTS
    model_id, dimension = settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_DIMENSION
    if not DocumentEmbedding.objects.filter(team_id=user.team_id, model_id=model_id).exists():
        raise NoEmbeddings(f"Nothing is indexed for this team with {model_id} yet.")
    scope = {"collection_id": collection_id, "document_id": document_id}
    latency: dict[str, float] = {}
    started = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal started
        now = time.perf_counter()
        latency[name] = round((now - started) * 1000, 2)
        started = now

    vector_hits: list[Hit] = []
    keyword_hits: list[Hit] = []
    depth = limit if mode != "hybrid" else max(HYBRID_CANDIDATES, 2 * limit)
    keyword_args = {"user": user, "query": query, "model_id": model_id, "limit": depth, **scope}
    # Hybrid: the keyword ranking runs in PostgreSQL on a second connection while this thread
    # embeds the query and ranks by vector, so the two take one core each instead of queueing.
    keyword_future = _background(keyword_ranking, **keyword_args) if mode == "hybrid" and _can_overlap() else None
    if mode in ("vector", "hybrid"):
        vector = embed_query(query)
        lap("embed_ms")
        vector_hits = vector_ranking(user=user, vector=vector, model_id=model_id, dimension=dimension, limit=depth, threshold=threshold, **scope)
        lap("vector_ms")
    if keyword_future is not None:
        keyword_hits, latency["keyword_ms"] = keyword_future.result()
        lap("keyword_wait_ms")
    elif mode in ("keyword", "hybrid"):
        keyword_hits = keyword_ranking(**keyword_args)
        lap("keyword_ms")
    if mode == "vector":
        hits = vector_hits
    elif mode == "keyword":
        hits = keyword_hits
    else:
        fused = reciprocal_rank_fusion(
            [[h.chunk_id for h in vector_hits], [h.chunk_id for h in keyword_hits]], weights=weights
        )[:limit]
        scale = max_rrf_score(weights) or 1.0
        hits = [Hit(chunk_id=chunk_id, score=score / scale) for chunk_id, score in fused]
        lap("fuse_ms")
    hits = hits[:limit]
    documents = _hydrate(hits, user)
    lap("load_ms")
    return SearchResult(hits=hits, documents=documents, latency=latency)


def _hydrate(hits: list[Hit], user: User) -> dict[uuid.UUID, Document]:
    """Fill chunk text and offsets, and load the (visible) documents, in two queries."""
    rows = {
        r["id"]: r
        for r in DocumentEmbedding.objects.filter(pk__in=[h.chunk_id for h in hits]).values(
            "id", "document_id", "chunk_index", "chunk_text", "start_offset", "end_offset", "document_version"
        )
    }
    for hit in hits:
        row = rows[hit.chunk_id]
        hit.document_id, hit.chunk_index, hit.text = row["document_id"], row["chunk_index"], row["chunk_text"]
        hit.start, hit.end, hit.version = row["start_offset"], row["end_offset"], row["document_version"]
    # Through visible_to again: the documents were visible when ranked, and still must be now.
    documents = Document.objects.visible_to(user).filter(pk__in={h.document_id for h in hits}).only(
        "id", "title", "collection_id", "updated_at", "version"
    )
    return {d.pk: d for d in documents}
