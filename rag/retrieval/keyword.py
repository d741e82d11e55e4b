"""BM25 keyword ranking inside PostgreSQL, over the viewer's visible chunks.

Corpus statistics (N, document frequency, average length) are those of the visible chunks
only, so a score reveals nothing about documents the viewer cannot read.

Hybrid search asks only for candidates: it weighs each candidate's exact BM25, whichever ranking
found it. The commonest words of a query hold most of its postings and tell its chunks apart least,
so, once a word's count among the viewer's chunks is known (counted by a search of the same scope in
the last minute, as the scope's size is cached), its postings are not read to choose hybrid's
candidates: they are chosen by the query's other words, and each one's score still counts the
common word, looked up in the chunk's own postings. Keyword search itself reads every posting.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from django.core.cache import cache

from config.replicas import read_connection
from rag.corpus.text_search import TEXT_SEARCH_CONFIG
from rag.retrieval.hits import Hit
from rag.retrieval.stats import STATS_CACHE_SECONDS, IndexStats
from rag.retrieval.visibility import SearchScope

K1 = 0.9
B = 0.4
# A common word: held by at least this share of the scope's chunks, and by at least this many (below
# that, its postings take under a millisecond to read). Its count is remembered for hybrid's candidates.
COMMON_WORD_SHARE = 0.02
COMMON_WORD_MIN_CHUNKS = 1_000
# At most this share of a query's words (the commonest) is left out of choosing the candidates: the
# others choose them.
COMMON_WORDS_OF_QUERY = 0.5
# Candidates chosen by the other words, before the common words' terms reorder them.
CANDIDATE_DEPTH = 2
# Remembered counts are the visible chunks' at most this long ago: like N and the average length, a
# stale count can shift a score a little, never let a chunk the viewer cannot read be ranked.
COUNT_CACHE_SECONDS = STATS_CACHE_SECONDS

# BM25 over the postings of the query's lexemes in the visible documents' collections only (an
# index-only scan of one index, skipping the collections the viewer cannot read, however many
# chunks there are), joined with the visible documents' current versions before anything is
# counted: document frequencies are those of the visible chunks. (The collection only narrows the
# scan; the join decides what is visible.) N and the average length
# come in as parameters (stats.scope_index_stats, from the per-document status rows). The
# numbers are cast to float8: bound as literals they would be numeric, several times slower.
# Each posting carries its word's place in the query (`word`), and its term reads the word's IDF from
# an array at that place: joining every posting with the words' IDFs cost about a tenth of the ranking
# (at 1M chunks, 10% visible, p50 / p95 46.2 / 83.5 ms against 42.6 / 75.6; bench/latency.py).
# One posting's BM25 term (the posting `p`, its lexeme's IDF the SQL expression `idf`), for the ranking
# and for the candidates it did not return alike.
_TERM = """{idf} * p.tf * (%(k1)s::float8 + 1)
         / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avgdl)s::float8))"""
_IDF = "ln(1 + (greatest(%(n)s::float8, {df}) - {df} + 0.5) / ({df} + 0.5))"
# The query's lexemes, in the order whose places `word` counts (the order keyword_ranking reads them in).
_LEXEMES = "SELECT array_agg(lexeme) AS lex FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s))"
# The visible postings of the query's words (those `read`), each with its word's place in the query.
_POSTINGS = """
  SELECT w.place::int AS word, k.chunk_id, k.tf, k.length
  FROM ql, unnest(ql.lex) WITH ORDINALITY AS w(lexeme, place)
    JOIN keyword_postings k ON k.lexeme = w.lexeme
    JOIN vd ON vd.id = k.document_id AND vd.version = k.document_version
  WHERE {read} AND k.model_id = %(model)s AND k.collection_id = ANY(ARRAY(SELECT DISTINCT collection_id FROM vd))"""
# Beside each chunk: the score a chunk holding every query word once would get (`ceiling`, see
# keyword_ranking), each held word's IDF, and the counts of the words whose postings were read.
_OUTPUTS = """
       (SELECT sum(idf) FROM idf)
         + ((SELECT cardinality(lex) FROM ql) - (SELECT count(*) FROM idf)) * ln(1 + (%(n)s::float8 + 0.5) / 0.5) AS ceiling,
       (SELECT json_object_agg(ql.lex[i.word], i.idf) FROM idf i, ql) AS idfs,
       (SELECT json_object_agg(ql.lex[c.word], c.df) FROM counted c, ql) AS counts"""
_BY_WORD = """by_word AS (
  SELECT array_agg(coalesce(i.idf, 0) ORDER BY place) AS idfs
  FROM generate_series(1, (SELECT cardinality(lex) FROM ql)) AS place LEFT JOIN idf i ON i.word = place)"""
_SQL = f"""
WITH ql AS ({_LEXEMES}),
vd AS MATERIALIZED ({{visible}}),
p AS MATERIALIZED ({_POSTINGS.format(read="true")}),
counted AS MATERIALIZED (SELECT word, count(*)::float8 AS df FROM p GROUP BY word),
idf AS MATERIALIZED (SELECT word, {_IDF.format(df="df")} AS idf FROM counted),
{_BY_WORD}
SELECT p.chunk_id, sum({{term}}) AS score,{_OUTPUTS}
FROM p
GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(limit)s
"""
# Hybrid's candidates: chosen by the words other than the common ones (`common`, their counts remembered),
# the best CANDIDATE_DEPTH x `limit` of them then scored in full, each common word's term read from the
# chunk's own postings (the primary key, chunk then lexeme; OFFSET 0 keeps it a lookup per chunk).
_CANDIDATES_SQL = f"""
WITH ql AS ({_LEXEMES}),
vd AS MATERIALIZED ({{visible}}),
common AS MATERIALIZED (
  SELECT c.place::int AS place, {_IDF.format(df="c.df")} AS idf
  FROM unnest(%(common)s::int[], %(common_dfs)s::float8[]) AS c(place, df)),
p AS MATERIALIZED ({_POSTINGS.format(read="w.place <> ALL(%(common)s::int[])")}),
counted AS MATERIALIZED (SELECT word, count(*)::float8 AS df FROM p GROUP BY word),
idf AS MATERIALIZED (SELECT word, {_IDF.format(df="df")} AS idf FROM counted UNION ALL SELECT place, idf FROM common),
{_BY_WORD},
chosen AS (
  SELECT p.chunk_id, sum({{term}}) AS by_others FROM p
  GROUP BY p.chunk_id ORDER BY by_others DESC, p.chunk_id LIMIT %(depth)s)
SELECT b.chunk_id, b.by_others + coalesce((
         SELECT sum({{term}})
         FROM (SELECT k.tf, k.length, array_position((SELECT lex FROM ql), k.lexeme) AS word FROM keyword_postings k
               WHERE k.chunk_id = b.chunk_id AND k.lexeme = ANY(ARRAY(SELECT ql.lex[place] FROM common, ql))
                 AND k.model_id = %(model)s OFFSET 0) AS p), 0) AS score,{_OUTPUTS}
FROM chosen b
ORDER BY score DESC, b.chunk_id LIMIT %(limit)s
"""


class KeywordRanking(NamedTuple):
    """The best chunks by BM25, and what scores any other chunk of the scope the same way."""

    hits: list[Hit]
    idf: dict[str, float]  # per query lexeme a visible chunk holds, from the visible chunks' frequencies
    avgdl: float
    ceiling: float  # what `relevance` divides by (see keyword_ranking)
    left_out: tuple[str, ...] = ()  # common words left out of choosing candidates (their terms still scored)


def keyword_ranking(
    *, scope: SearchScope, query: str, model_id: str, limit: int, stats: IndexStats, candidates: bool = False
) -> KeywordRanking:
    """The `limit` best chunks by BM25, scored with the scope's statistics `stats`.

    With `candidates` (hybrid search, which weighs every candidate's exact BM25 however it was found), the
    query's commonest remembered words are left out of choosing the chunks; each chunk's score still counts
    them (SciFact hybrid nDCG@10 0.7424 -> 0.7421; at 1M chunks the ranking's p95 about halves; docs/benchmarks.md).
    """
    visible, visible_params = scope.whole_named  # read whole, materialised (vd)
    n = float(max(stats.chunks, 1))
    avgdl = max(stats.keyword_length / n, 1.0)
    params: dict = {"cfg": TEXT_SEARCH_CONFIG, "q": query}
    with read_connection().cursor() as cursor:
        common: list[tuple[str, int]] = []
        lexemes: list[str] = []
        # Only hybrid's candidates, in a scope where a word can be common, read the lexemes first (to look up
        # their remembered counts); otherwise the one statement reads them itself.
        if candidates and n >= COMMON_WORD_MIN_CHUNKS:
            cursor.execute(_LEXEMES, params)
            lexemes = cursor.fetchone()[0] or []
            remembered = _remembered_counts(scope, model_id, lexemes)
            common = sorted(((w, df) for w, df in remembered.items() if df >= COMMON_WORD_SHARE * n), key=lambda item: -item[1])
            common = common[: int(len(lexemes) * COMMON_WORDS_OF_QUERY)]
        params |= {
            **visible_params,
            "model": model_id,
            "k1": K1,
            "b": B,
            "limit": limit,
            "depth": CANDIDATE_DEPTH * limit,
            "n": n,
            "avgdl": avgdl,
            "common": [lexemes.index(lexeme) + 1 for lexeme, _ in common],
            "common_dfs": [float(df) for _, df in common],
        }
        sql = _CANDIDATES_SQL if common else _SQL
        cursor.execute(sql.format(visible=visible, term=_TERM.format(idf="(SELECT idfs FROM by_word)[p.word]")), params)
        rows = cursor.fetchall()
    _remember_counts(scope, model_id, rows[0][4] if rows and rows[0][4] else {}, chunks=n)
    # `relevance`: the score against what a chunk holding every query word once, at average length,
    # would get (a word no visible chunk holds counts with the IDF of an unseen word). Unlike the best
    # score of this query, it does not make a weak match look strong just because nothing better
    # matched: a chunk sharing only "remote" and "work" with "connecting to company network while
    # working remotely" stays low, even where no passage says "network".
    ceiling = float(rows[0][2]) if rows and rows[0][2] else 0.0
    hits = [Hit(chunk_id=r[0], score=float(r[1]), relevance=min(1.0, float(r[1]) / ceiling) if ceiling else 0.0) for r in rows]
    # No row: no visible chunk holds a query word, and every chunk's BM25 is 0.
    idf = {lexeme: float(value) for lexeme, value in (rows[0][3] if rows else {}).items()}
    return KeywordRanking(hits, idf, avgdl, ceiling, tuple(lexeme for lexeme, _ in common))


def keyword_relevances(ranking: KeywordRanking, *, chunk_ids: list[int], model_id: str) -> dict[int, float]:
    """The BM25 relevance of chunks the ranking did not return (found by another ranking), on its scale.

    Hybrid fusion averages each candidate's relevances; counting 0 for a chunk that merely fell below
    this ranking's cut would sink a chunk the other rankings found. The caller passes only chunks of
    visible documents (other rankings' hits), and the frequencies are the visible chunks' (`ranking.idf`).
    """
    ceiling = ranking.ceiling
    if not chunk_ids or ceiling <= 0:
        return {}
    with read_connection().cursor() as cursor:
        cursor.execute(
            # Each candidate's postings of the query's words, looked up in the primary key (chunk, lexeme).
            # OFFSET 0 keeps the subquery per candidate: flattened, the planner reads every posting of the
            # query's words from the covering index and hashes them against the candidates (~19 ms for 100
            # candidates at 100k chunks, against ~1 ms; bench/latency.py).
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


def _count_key(scope: SearchScope, model_id: str, lexeme: str) -> str:
    # A digest: a lexeme may be long, or hold what a cache key may not.
    return f"rag:df:{model_id}:{scope.cache_key}:{hashlib.blake2b(lexeme.encode(), digest_size=12).hexdigest()}"


def _remembered_counts(scope: SearchScope, model_id: str, lexemes: list[str]) -> dict[str, int]:
    """The visible chunks' counts of those of `lexemes` a search of this scope counted as common lately."""
    keys = {_count_key(scope, model_id, lexeme): lexeme for lexeme in lexemes}
    return {keys[key]: int(df) for key, df in cache.get_many(list(keys)).items()}


def _remember_counts(scope: SearchScope, model_id: str, counts: dict[str, float], *, chunks: float) -> None:
    """Remember the counts of the common words among `counts` (each word's visible chunks, just counted)."""
    floor = max(COMMON_WORD_SHARE * chunks, COMMON_WORD_MIN_CHUNKS)
    common = {_count_key(scope, model_id, lexeme): int(df) for lexeme, df in counts.items() if df >= floor}
    if common:
        cache.set_many(common, COUNT_CACHE_SECONDS)
