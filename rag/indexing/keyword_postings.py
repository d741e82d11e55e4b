"""Keyword postings: the inverted index keyword search reads, written with a document's chunks.

Each chunk's keyword columns (a tsvector of the title, the headings above the chunk and its text,
and its length) and its postings (one row per lexeme) are written together.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection

from rag.corpus.text_search import TEXT_SEARCH_CONFIG


def _keyword_vector(*, title: str, headings: str, text: str) -> str:
    """SQL for a chunk's keyword text: its document's title (weight A), the headings above it that it does
    not itself contain (B, as the embedding input adds them, so a chunk deep in a section still matches the
    words of the heading that names its topic), its text. `headings`: a jsonb array of strings."""
    return f"""setweight(to_tsvector(%(cfg)s::regconfig, {title}), 'A')
               || setweight(to_tsvector(%(cfg)s::regconfig, coalesce(
                    (SELECT string_agg(h, ' ') FROM jsonb_array_elements_text({headings}) h
                     WHERE strpos({text}, h) = 0), '')), 'B')
               || to_tsvector(%(cfg)s::regconfig, {text})"""


# A tsvector's length for BM25: its lexemes' positions.
_LENGTH = "coalesce((SELECT sum(cardinality(u.positions)) FROM unnest({v}) u), 0)"


def keyword_columns(*, chunks: Sequence[tuple[str, str, Sequence[str]]]) -> list[tuple[str, int]]:
    """The keyword columns (search_vector as text, doc_length) of new chunks, given as (document title, text, heading path).

    Computed before the chunks are written, so each is written once: filled in by an UPDATE after the
    insert, most chunk rows (a page holds few, vectors inline) would be written again elsewhere, with
    a second entry in every index, the HNSW graph's included.
    """
    if not chunks:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT x.v::text, {_LENGTH.format(v="x.v")}
                FROM unnest(%(titles)s::text[], %(texts)s::text[], %(headings)s::text[])
                       WITH ORDINALITY AS c(title, chunk_text, heading_path, n),
                     LATERAL (SELECT {_keyword_vector(title="c.title", headings="c.heading_path::jsonb", text="c.chunk_text")} AS v) x
                ORDER BY c.n""",
            {
                "cfg": TEXT_SEARCH_CONFIG,
                "titles": [title for title, _, _ in chunks],
                "texts": [text for _, text, _ in chunks],
                "headings": [json.dumps(list(path)) for _, _, path in chunks],
            },
        )
        return [(vector, int(length)) for vector, length in cursor.fetchall()]


def refresh_search_vectors(*, document_ids: list, model_id: str | None = None) -> None:
    """(Re)compute the keyword columns of these documents' chunks (after a title change), then their postings."""
    model_filter = "AND c.model_id = %(model)s" if model_id else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE document_embeddings e SET search_vector = s.v, doc_length = {_LENGTH.format(v="s.v")}
                FROM (SELECT c.id, {_keyword_vector(title="d.title", headings="c.metadata -> 'heading_path'", text="c.chunk_text")} AS v
                      FROM document_embeddings c JOIN documents_document d ON d.id = c.document_id
                      WHERE c.document_id = ANY(%(ids)s::uuid[]) {model_filter}) s
                WHERE e.id = s.id""",
            {"cfg": TEXT_SEARCH_CONFIG, "ids": [str(pk) for pk in document_ids], "model": model_id},
        )
    write_postings(document_ids=document_ids, model_id=model_id)


def write_postings(*, document_ids: list, model_id: str | None = None) -> None:
    """Replace these documents' chunks' postings with what their keyword columns hold, and their keyword lengths."""
    model_filter = "AND e.model_id = %(model)s" if model_id else ""
    params = {"ids": [str(pk) for pk in document_ids], "model": model_id}
    with connection.cursor() as cursor:
        # The chunks' postings follow their keyword columns (a chunk's own are deleted with it).
        cursor.execute(
            f"""DELETE FROM keyword_postings k USING document_embeddings e
                WHERE k.chunk_id = e.id AND e.document_id = ANY(%(ids)s::uuid[]) {model_filter}""",
            params,
        )
        cursor.execute(
            f"""INSERT INTO keyword_postings (chunk_id, lexeme, document_id, document_version, collection_id, model_id, tf, length)
                SELECT e.id, u.lexeme, e.document_id, e.document_version, d.collection_id, e.model_id,
                       least(cardinality(u.positions), 32767), e.doc_length
                FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id, unnest(e.search_vector) u
                WHERE e.document_id = ANY(%(ids)s::uuid[]) {model_filter}""",
            params,
        )
        cursor.execute(
            f"""UPDATE document_index_status s SET keyword_length = coalesce(
                    (SELECT sum(e.doc_length) FROM document_embeddings e
                     WHERE e.document_id = s.document_id AND e.model_id = s.model_id), 0)
                WHERE s.document_id = ANY(%(ids)s::uuid[]) {model_filter.replace("e.", "s.")}""",
            params,
        )


def refresh_title(document_id) -> None:
    """A title change updates the keyword columns only: no embedding calls."""
    refresh_search_vectors(document_ids=[document_id])
