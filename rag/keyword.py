"""BM25 keyword ranking inside PostgreSQL, over the viewer's visible chunks.

Corpus statistics (N, document frequency, average length) are computed at query time
over the visible chunks only, so a score reveals nothing about documents the viewer
cannot read.
"""
from __future__ import annotations

from django.db import connection

TEXT_SEARCH_CONFIG = "english"
K1 = 0.9
B = 0.4

# Query lexemes -> an OR tsquery built in SQL from the lexeme array: each lexeme is quoted as
# an operand, so tsquery metacharacters in user text can never become operators.
_SQL = """
WITH ql AS (SELECT lexeme FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s))),
tq AS (SELECT array_agg(lexeme) AS lex,
              string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ')::tsquery AS tsq
       FROM ql),
vd AS MATERIALIZED ({visible}),
-- N and the average length over the visible chunks, from the narrow per-document status rows
-- (written with the chunks, in one transaction) rather than the wide chunk table.
st AS (SELECT greatest(sum(s.chunk_count), 1)::float8 AS n,
              greatest(sum(s.keyword_length)::float8 / greatest(sum(s.chunk_count), 1), 1) AS avgdl
       FROM document_index_status s JOIN vd ON vd.id = s.document_id AND vd.version = s.indexed_version
       WHERE s.model_id = %(model)s AND s.document_id = ANY(ARRAY(SELECT id FROM vd))),
-- Matching chunks: the GIN index's matches intersected with the visible documents' chunks
-- (document_id = ANY(...) lets the planner AND the two bitmaps) before rows are read.
m AS MATERIALIZED (
  SELECT e.id, e.search_vector AS sv, e.doc_length AS dl
  FROM document_embeddings e JOIN vd ON vd.id = e.document_id AND vd.version = e.document_version, tq
  WHERE e.search_vector @@ tq.tsq AND e.model_id = %(model)s AND e.document_id = ANY(ARRAY(SELECT id FROM vd))),
-- Term frequencies of the query's lexemes only: re-weight the query's lexemes to A, keep the
-- A's (C functions, no per-lexeme rows), then unnest the few that remain.
hit AS (SELECT id, dl, (u).lexeme, cardinality((u).positions)::float8 AS tf
        FROM (SELECT m.id, m.dl, unnest(ts_filter(setweight(setweight(m.sv, 'D'), 'A', tq.lex), '{{a}}')) AS u
              FROM m, tq) x),
df AS (SELECT lexeme, count(*)::float8 AS df FROM hit GROUP BY lexeme)
SELECT h.id, sum(ln(1 + (s.n - d.df + 0.5) / (d.df + 0.5)) * h.tf * (%(k1)s + 1)
                 / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.dl / s.avgdl))) AS score
FROM hit h JOIN df d USING (lexeme), st s
GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(limit)s
"""


def keyword_search_sql(*, visible_documents_sql: str, visible_params: list, model_id: str, query: str, limit: int) -> tuple[str, list]:
    """SQL and params whose rows are (chunk_id, bm25 score), best first."""
    # The visible subquery uses positional %s params; name them so both styles don't mix.
    named = {f"v{i}": value for i, value in enumerate(visible_params)}
    visible = visible_documents_sql.replace("%%", "\x00")
    for i in range(len(visible_params)):
        visible = visible.replace("%s", f"%(v{i})s", 1)
    visible = visible.replace("\x00", "%%")
    sql = _SQL.format(visible=visible)
    return sql, {**named, "cfg": TEXT_SEARCH_CONFIG, "q": query, "model": model_id, "k1": K1, "b": B, "limit": limit}


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
