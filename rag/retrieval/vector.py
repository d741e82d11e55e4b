"""Vector ranking: cosine similarity to the query over the scope's chunks, exact or through HNSW."""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction

from rag.retrieval.hits import Hit
from rag.retrieval.query import vector_literal
from rag.retrieval.vector_index import vector_expression
from rag.retrieval.visibility import SearchScope


def vector_ranking(
    *, scope: SearchScope, vector: list[float], model_id: str, dimension: int, limit: int, threshold: float, scope_chunks: int
) -> list[Hit]:
    """The `limit` nearest chunks scoring at least `threshold`; `scope_chunks` decides exact scan or HNSW."""
    visible, visible_params = scope.sql, scope.params
    literal = vector_literal(vector)
    with transaction.atomic(), connection.cursor() as cursor:
        if scope_chunks <= settings.RAG_EXACT_SEARCH_MAX_CHUNKS:
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
            [*visible_params, literal, model_id, literal, limit, threshold],
        )
        rows = cursor.fetchall()
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
    ]
