"""Keyword postings, the inverted index keyword search reads, follow a document's chunks."""

from __future__ import annotations

from django.db import connection

from documents.services import document_delete
from rag.indexing.keyword_postings import refresh_title
from rag.indexing.pipeline import index_documents, remove_document_chunks
from rag.models import KeywordPosting
from tests.factories import DocumentFactory


def postings_of(document) -> set[tuple[int, str, int, int]]:
    return set(KeywordPosting.objects.filter(document_id=document.pk).values_list("chunk_id", "lexeme", "tf", "document_version"))


def expected_postings(document) -> set[tuple[int, str, int, int]]:
    """What each current chunk's search_vector says: (chunk, lexeme, occurrences, version)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT e.id, u.lexeme, cardinality(u.positions), e.document_version "
            "FROM document_embeddings e, unnest(e.search_vector) u WHERE e.document_id = %s",
            [document.pk],
        )
        return set(cursor.fetchall())


def test_postings_follow_the_chunks_through_edits_renames_and_removal(cast):
    doc = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Owls",
        text="# Owls\n\nOwls hunt mice at night. Owls are quiet hunters.",
    )
    index_documents(document_ids=[doc.pk])
    first = postings_of(doc)
    assert first == expected_postings(doc)
    assert ("owl" in {lexeme for _, lexeme, _, _ in first}) and any(tf >= 3 for _, lexeme, tf, _ in first if lexeme == "owl")

    doc.text, doc.version = "# Volcanoes\n\nVolcanoes erupt molten lava.", doc.version + 1
    doc.save()
    index_documents(document_ids=[doc.pk])
    second = postings_of(doc)
    assert second == expected_postings(doc)
    assert {version for *_, version in second} == {doc.version}
    assert "mice" not in {lexeme for _, lexeme, _, _ in second}, "the old chunks' postings went with them"

    doc.title = "Fire mountains"
    doc.save()
    refresh_title(doc.pk)
    assert "mountain" in {lexeme for _, lexeme, _, _ in postings_of(doc)}
    assert postings_of(doc) == expected_postings(doc)

    document_delete(document=doc, by=cast.alice)
    remove_document_chunks(document_ids=[doc.pk])
    assert not KeywordPosting.objects.filter(document_id=doc.pk).exists()
