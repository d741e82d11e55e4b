"""How many chunks a search scope holds, and their total keyword length (cached briefly)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache

from config.replicas import read_connection
from rag.retrieval.visibility import SearchScope

STATS_CACHE_SECONDS = 60
# The size of a model's whole index moves slowly and only steers the exact/HNSW choice.
MODEL_CHUNKS_CACHE_SECONDS = 300


@dataclass(frozen=True)
class IndexStats:
    """The scope's chunks of one model: how many, and their total keyword length."""

    chunks: int
    keyword_length: int


def scope_index_stats(scope: SearchScope, *, model_id: str) -> IndexStats:
    """Counted from the narrow per-document status rows (written with the chunks, in one transaction).

    These numbers only steer ranking (exact scan or HNSW; BM25's N and average length); the
    ranking queries themselves filter by visibility. So they are cached for a short while per
    viewer and scope: a stale figure can cost a little speed or score precision, never access.
    """
    key = f"rag:stats:{model_id}:{scope.cache_key}"
    cached = cache.get(key)
    if cached is not None:
        return IndexStats(*cached)
    visible, params = scope.whole_sql, scope.whole_params
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"WITH v AS ({visible}) SELECT coalesce(sum(s.chunk_count), 0), coalesce(sum(s.keyword_length), 0) "
            "FROM document_index_status s JOIN v ON v.id = s.document_id AND v.version = s.indexed_version "
            "WHERE s.model_id = %s AND s.document_id = ANY(ARRAY(SELECT id FROM v))",
            [*params, model_id],
        )
        chunks, keyword_length = cursor.fetchone()
    stats = IndexStats(int(chunks), int(keyword_length))
    cache.set(key, (stats.chunks, stats.keyword_length), STATS_CACHE_SECONDS)
    return stats


def model_chunk_count(model_id: str) -> int:
    """Chunks of `model_id` across every team: what its HNSW index holds, and an iterative scan wades through."""
    key = f"rag:model-chunks:{model_id}"
    cached = cache.get(key)
    if cached is None:
        with read_connection().cursor() as cursor:
            # An index-only count on (model_id, content_hash); a few milliseconds per 100k chunks, every few minutes.
            cursor.execute("SELECT count(*) FROM document_embeddings WHERE model_id = %s", [model_id])
            cached = int(cursor.fetchone()[0])
        cache.set(key, cached, MODEL_CHUNKS_CACHE_SECONDS)
    return int(cached)
