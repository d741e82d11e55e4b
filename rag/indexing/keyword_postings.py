"""Keyword postings: the inverted index keyword search reads, written with a document's chunks.

Each chunk's keyword columns (a tsvector of the title, the headings above the chunk and its text,
and its length) and its postings (one row per lexeme) are refreshed together.
"""

from __future__ import annotations

from django.db import connection

from rag.retrieval.keyword import TEXT_SEARCH_CONFIG


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
