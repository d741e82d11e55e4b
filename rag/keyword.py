"""BM25 keyword ranking inside PostgreSQL, over the viewer's visible chunks.

Corpus statistics (N, document frequency, average length) are those of the visible chunks
only, so a score reveals nothing about documents the viewer cannot read.
"""
from __future__ import annotations

from django.db import connection

TEXT_SEARCH_CONFIG = "english"
K1 = 0.9
B = 0.4

# BM25 over the postings of the query's lexemes only (an index-only scan of one index, however
# many chunks there are), joined with the visible documents' current versions before anything
# is counted: document frequencies are those of the visible chunks. N and the average length
# come in as parameters (search.visible_index_stats, from the per-document status rows). The
# numbers are cast to float8: bound as literals they would be numeric, several times slower.
_SQL = """
WITH ql AS (SELECT array_agg(lexeme) AS lex FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s))),
vd AS MATERIALIZED ({visible}),
p AS MATERIALIZED (
  SELECT k.lexeme, k.chunk_id, k.tf, k.length
  FROM keyword_postings k JOIN vd ON vd.id = k.document_id AND vd.version = k.document_version, ql
  WHERE k.model_id = %(model)s AND k.lexeme = ANY(ql.lex)),
df AS (SELECT lexeme, count(*)::float8 AS df FROM p GROUP BY lexeme)
SELECT p.chunk_id, sum(ln(1 + (greatest(%(n)s::float8, d.df) - d.df + 0.5) / (d.df + 0.5)) * p.tf * (%(k1)s::float8 + 1)
                       / (p.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avgdl)s::float8))) AS score
FROM p JOIN df d USING (lexeme)
GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(limit)s
"""


def keyword_search_sql(*, visible_documents_sql: str, visible_params: list, model_id: str, query: str, limit: int,
                       chunks: int, keyword_length: int) -> tuple[str, dict]:
    """SQL and params whose rows are (chunk_id, bm25 score), best first.

    `chunks` and `keyword_length` are the visible chunks' count and total keyword length.
    """
    # The visible subquery uses positional %s params; name them so both styles don't mix.
    named = {f"v{i}": value for i, value in enumerate(visible_params)}
    visible = visible_documents_sql.replace("%%", "\x00")
    for i in range(len(visible_params)):
        visible = visible.replace("%s", f"%(v{i})s", 1)
    visible = visible.replace("\x00", "%%")
    sql = _SQL.format(visible=visible)
    n = float(max(chunks, 1))
    avgdl = max(keyword_length / n, 1.0)
    return sql, {**named, "cfg": TEXT_SEARCH_CONFIG, "q": query, "model": model_id, "k1": K1, "b": B, "limit": limit,
                 "n": n, "avgdl": avgdl}


def refresh_search_vectors(*, document_ids: list, model_id: str | None = None) -> None:
    """(Re)compute the keyword index columns of these documents' chunks: title, the headings above the chunk, its text.

    Headings the chunk does not itself contain are added, as the embedding input adds them, so a
    chunk deep in a section still matches the words of the heading that names its topic.
    """
    model_filter = "AND e.model_id = %s" if model_id else ""
    model_param = [model_id] if model_id else []
    ids = [str(pk) for pk in document_ids]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE document_embeddings e SET search_vector = s.v, doc_length = s.n
                FROM (SELECT c.id, x.v, coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(x.v) u), 0) AS n
                      FROM document_embeddings c JOIN documents_document d ON d.id = c.document_id,
                           LATERAL (SELECT setweight(to_tsvector(%s::regconfig, d.title), 'A')
                                           || setweight(to_tsvector(%s::regconfig, coalesce(
                                                (SELECT string_agg(h, ' ') FROM jsonb_array_elements_text(c.metadata -> 'heading_path') h
                                                 WHERE strpos(c.chunk_text, h) = 0), '')), 'B')
                                           || to_tsvector(%s::regconfig, c.chunk_text) AS v) x
                      WHERE c.document_id = ANY(%s::uuid[]) {model_filter.replace("e.", "c.")}) s
                WHERE e.id = s.id""",
            [TEXT_SEARCH_CONFIG, TEXT_SEARCH_CONFIG, TEXT_SEARCH_CONFIG, ids, *model_param],
        )
        # The chunks' postings follow their keyword columns (a chunk's own are deleted with it).
        cursor.execute(
            f"""DELETE FROM keyword_postings k USING document_embeddings e
                WHERE k.chunk_id = e.id AND e.document_id = ANY(%s::uuid[]) {model_filter}""",
            [ids, *model_param],
        )
        cursor.execute(
            f"""INSERT INTO keyword_postings (chunk_id, lexeme, document_id, document_version, model_id, tf, length)
                SELECT e.id, u.lexeme, e.document_id, e.document_version, e.model_id,
                       least(cardinality(u.positions), 32767), e.doc_length
                FROM document_embeddings e, unnest(e.search_vector) u
                WHERE e.document_id = ANY(%s::uuid[]) {model_filter}""",
            [ids, *model_param],
        )
        cursor.execute(
            f"""UPDATE document_index_status s SET keyword_length = coalesce(
                    (SELECT sum(e.doc_length) FROM document_embeddings e
                     WHERE e.document_id = s.document_id AND e.model_id = s.model_id), 0)
                WHERE s.document_id = ANY(%s::uuid[]) {model_filter.replace("e.", "s.")}""",
            [ids, *model_param],
        )


def refresh_title(document_id) -> None:
    """A title change updates the keyword columns only: no embedding calls."""
    refresh_search_vectors(document_ids=[document_id])
