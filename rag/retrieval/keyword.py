"""BM25 keyword ranking inside PostgreSQL, over the viewer's visible chunks.

Corpus statistics (N, document frequency, average length) are those of the visible chunks
only, so a score reveals nothing about documents the viewer cannot read.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection

from rag.retrieval.hits import Hit
from rag.retrieval.stats import IndexStats
from rag.retrieval.visibility import SearchScope

# The text search configuration of the chunks' keyword columns and of queries (one for both).
TEXT_SEARCH_CONFIG = "english"
K1 = 0.9
B = 0.4

# BM25 over the postings of the query's lexemes in the visible documents' collections only (an
# index-only scan of one index, skipping the collections the viewer cannot read, however many
# chunks there are), joined with the visible documents' current versions before anything is
# counted: document frequencies are those of the visible chunks. (The collection only narrows the
# scan; the join decides what is visible.) N and the average length
# come in as parameters (stats.scope_index_stats, from the per-document status rows). The
# numbers are cast to float8: bound as literals they would be numeric, several times slower.
# Each posting carries its word's place in the query (`word`), and its term reads the word's IDF from
# an array at that place: joining every posting with the words' IDFs cost about a tenth of the ranking
# (at 1M chunks, 10% visible, p50 / p95 46.2 / 83.5 ms against 42.6 / 75.6; docs/benchmarks.md, issue
# 17, twelfth session).
# One posting's BM25 term (the posting `p`, its lexeme's IDF the SQL expression `idf`), for the ranking
# and for the candidates it did not return alike.
_TERM = """{idf} * p.tf * (%(k1)s::float8 + 1)
         / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avgdl)s::float8))"""
_SQL = """
WITH ql AS (SELECT array_agg(lexeme) AS lex FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s))),
vd AS MATERIALIZED ({visible}),
p AS MATERIALIZED (
  SELECT w.word::int AS word, k.chunk_id, k.tf, k.length
  FROM ql, unnest(ql.lex) WITH ORDINALITY AS w(lexeme, word)
    JOIN keyword_postings k ON k.lexeme = w.lexeme
    JOIN vd ON vd.id = k.document_id AND vd.version = k.document_version
  WHERE k.model_id = %(model)s AND k.collection_id = ANY(ARRAY(SELECT DISTINCT collection_id FROM vd))),
idf AS MATERIALIZED (
  SELECT word, ln(1 + (greatest(%(n)s::float8, df) - df + 0.5) / (df + 0.5)) AS idf
  FROM (SELECT word, count(*)::float8 AS df FROM p GROUP BY word) AS counted),
by_word AS (
  SELECT array_agg(coalesce(i.idf, 0) ORDER BY place) AS idfs
  FROM generate_series(1, (SELECT cardinality(lex) FROM ql)) AS place LEFT JOIN idf i ON i.word = place)
SELECT p.chunk_id, sum({term}) AS score,
       (SELECT sum(idf) FROM idf)
         + ((SELECT cardinality(lex) FROM ql) - (SELECT count(*) FROM idf)) * ln(1 + (%(n)s::float8 + 0.5) / 0.5) AS ceiling,
       (SELECT json_object_agg(ql.lex[i.word], i.idf) FROM idf i, ql) AS idfs
FROM p
GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(limit)s
"""


class KeywordRanking(NamedTuple):
    """The best chunks by BM25, and what scores any other chunk of the scope the same way."""

    hits: list[Hit]
    idf: dict[str, float]  # per query lexeme a visible chunk holds, from the visible chunks' frequencies
    avgdl: float
    ceiling: float  # what `relevance` divides by (see keyword_ranking)


def keyword_ranking(*, scope: SearchScope, query: str, model_id: str, limit: int, stats: IndexStats) -> KeywordRanking:
    """The `limit` best chunks by BM25, scored with the scope's statistics `stats`."""
    visible, visible_params = scope.whole_named  # read whole, materialised (vd)
    n = float(max(stats.chunks, 1))
    avgdl = max(stats.keyword_length / n, 1.0)
    params = {
        **visible_params,
        "cfg": TEXT_SEARCH_CONFIG,
        "q": query,
        "model": model_id,
        "k1": K1,
        "b": B,
        "limit": limit,
        "n": n,
        "avgdl": avgdl,
    }
    with connection.cursor() as cursor:
        cursor.execute(_SQL.format(visible=visible, term=_TERM.format(idf="(SELECT idfs FROM by_word)[p.word]")), params)
        rows = cursor.fetchall()
    # `relevance`: the score against what a chunk holding every query word once, at average length,
    # would get (a word no visible chunk holds counts with the IDF of an unseen word). Unlike the best
    # score of this query, it does not make a weak match look strong just because nothing better
    # matched: a chunk sharing only "remote" and "work" with "connecting to company network while
    # working remotely" stays low, even where no passage says "network".
    ceiling = float(rows[0][2]) if rows and rows[0][2] else 0.0
    hits = [Hit(chunk_id=r[0], score=float(r[1]), relevance=min(1.0, float(r[1]) / ceiling) if ceiling else 0.0) for r in rows]
    # No row: no visible chunk holds a query word, and every chunk's BM25 is 0.
    idf = {lexeme: float(value) for lexeme, value in (rows[0][3] if rows else {}).items()}
    return KeywordRanking(hits, idf, avgdl, ceiling)


def keyword_relevances(ranking: KeywordRanking, *, chunk_ids: list[int], model_id: str) -> dict[int, float]:
    """The BM25 relevance of chunks the ranking did not return (found by another ranking), on its scale.

    Hybrid fusion averages each candidate's relevances; counting 0 for a chunk that merely fell below
    this ranking's cut would sink a chunk the other rankings found. The caller passes only chunks of
    visible documents (other rankings' hits), and the frequencies are the visible chunks' (`ranking.idf`).
    """
    ceiling = ranking.ceiling
    if not chunk_ids or ceiling <= 0:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            # Each candidate's postings of the query's words, looked up in the primary key (chunk, lexeme).
            # OFFSET 0 keeps the subquery per candidate: flattened, the planner reads every posting of the
            # query's words from the covering index and hashes them against the candidates (~19 ms for 100
            # candidates at 100k chunks, against ~1 ms; docs/benchmarks.md, issue 17, ninth session).
            f"""SELECT c.id, sum({_TERM.format(idf="i.idf")})
                FROM unnest(%(chunks)s::int8[]) AS c(id),
                     LATERAL (SELECT k.lexeme, k.tf, k.length FROM keyword_postings k
                              WHERE k.chunk_id = c.id AND k.lexeme = ANY(%(lexemes)s::text[]) AND k.model_id = %(model)s
                              OFFSET 0) p
                JOIN unnest(%(lexemes)s::text[], %(idfs)s::float8[]) AS i(lexeme, idf) ON i.lexeme = p.lexeme
                GROUP BY c.id""",
            {
                "lexemes": list(ranking.idf),
                "idfs": list(ranking.idf.values()),
                "chunks": chunk_ids,
                "model": model_id,
                "k1": K1,
                "b": B,
                "avgdl": ranking.avgdl,
            },
        )
        rows = cursor.fetchall()
    return {chunk_id: min(1.0, float(score) / ceiling) for chunk_id, score in rows}
