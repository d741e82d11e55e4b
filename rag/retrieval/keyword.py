"""BM25 keyword ranking inside PostgreSQL, over the viewer's visible chunks.

Corpus statistics (N, document frequency, average length) are those of the visible chunks
only, so a score reveals nothing about documents the viewer cannot read.
"""

from __future__ import annotations

from django.db import connection

from rag.retrieval.hits import Hit
from rag.retrieval.stats import IndexStats
from rag.retrieval.visibility import SearchScope

# The text search configuration of the chunks' keyword columns and of queries (one for both).
TEXT_SEARCH_CONFIG = "english"
K1 = 0.9
B = 0.4

# BM25 over the postings of the query's lexemes only (an index-only scan of one index, however
# many chunks there are), joined with the visible documents' current versions before anything
# is counted: document frequencies are those of the visible chunks. N and the average length
# come in as parameters (stats.scope_index_stats, from the per-document status rows). The
# numbers are cast to float8: bound as literals they would be numeric, several times slower.
_SQL = """
WITH ql AS (SELECT array_agg(lexeme) AS lex FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s))),
vd AS MATERIALIZED ({visible}),
p AS MATERIALIZED (
  SELECT k.lexeme, k.chunk_id, k.tf, k.length
  FROM keyword_postings k JOIN vd ON vd.id = k.document_id AND vd.version = k.document_version, ql
  WHERE k.model_id = %(model)s AND k.lexeme = ANY(ql.lex)),
df AS (SELECT lexeme, count(*)::float8 AS df FROM p GROUP BY lexeme),
idf AS (SELECT lexeme, ln(1 + (greatest(%(n)s::float8, df) - df + 0.5) / (df + 0.5)) AS idf FROM df)
SELECT p.chunk_id, sum(i.idf * p.tf * (%(k1)s::float8 + 1)
                       / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avgdl)s::float8))) AS score,
       (SELECT sum(idf) FROM idf) AS ceiling
FROM p JOIN idf i USING (lexeme)
GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(limit)s
"""


def keyword_ranking(*, scope: SearchScope, query: str, model_id: str, limit: int, stats: IndexStats) -> list[Hit]:
    """The `limit` best chunks by BM25, scored with the scope's statistics `stats`."""
    visible, visible_params = scope.named
    n = float(max(stats.chunks, 1))
    params = {
        **visible_params,
        "cfg": TEXT_SEARCH_CONFIG,
        "q": query,
        "model": model_id,
        "k1": K1,
        "b": B,
        "limit": limit,
        "n": n,
        "avgdl": max(stats.keyword_length / n, 1.0),
    }
    with connection.cursor() as cursor:
        cursor.execute(_SQL.format(visible=visible), params)
        rows = cursor.fetchall()
    # `relevance`: the score against what a chunk holding every query word once, at average length,
    # would get. Unlike the best score of this query, it does not make a weak match look strong
    # just because nothing better matched (a chunk sharing only two common words stays low).
    return [Hit(chunk_id=r[0], score=float(r[1]), relevance=min(1.0, float(r[1]) / float(r[2])) if r[2] else 0.0) for r in rows]
