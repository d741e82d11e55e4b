"""Keyword postings, the inverted index keyword search reads, follow a document's chunks."""

from __future__ import annotations

from django.db import connection

from documents.models import Document
from documents.services import document_delete
from rag.indexing.keyword_postings import refresh_search_vectors, refresh_title
from rag.indexing.pipeline import index_documents, remove_document_chunks
from rag.models import KeywordPosting
from rag.retrieval.search import search
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

    document_delete(document=doc)
    remove_document_chunks(document_ids=[doc.pk])
    assert not KeywordPosting.objects.filter(document_id=doc.pk).exists()


def collections_of_postings(document) -> set:
    return set(KeywordPosting.objects.filter(document_id=document.pk).values_list("collection_id", flat=True))


def keyword_titles(user, query: str) -> list[str]:
    return [ranked.document.title for ranked in search(user=user, query=query, mode="keyword").ranked()]


def test_postings_carry_the_collection_and_follow_a_document_that_moves(cast):
    """Keyword search scans only the readable collections' postings: a move must move them too."""
    doc = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Owls", text="# Owls\n\nOwls hunt voles at night."
    )
    index_documents(document_ids=[doc.pk])
    assert collections_of_postings(doc) == {cast.private.pk}
    assert keyword_titles(cast.bob, "voles") == [], "bob cannot read the private collection"

    # A move as the admin makes it (a plain save of the collection), no reindexing.
    doc.collection = cast.handbook
    doc.save()
    assert collections_of_postings(doc) == {cast.handbook.pk}
    assert keyword_titles(cast.bob, "voles") == ["Owls"]

    # And back, through a queryset update (no signals at all).
    Document.objects.filter(pk=doc.pk).update(collection=cast.private)
    assert collections_of_postings(doc) == {cast.private.pk}
    assert keyword_titles(cast.bob, "voles") == []
    assert keyword_titles(cast.alice, "voles") == ["Owls"]


def test_a_posting_in_a_collection_it_no_longer_belongs_to_is_not_what_decides_visibility(cast):
    """The collection only narrows the scan: a stale copy can hide a passage, never show one."""
    doc = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Owls", text="# Owls\n\nOwls hunt voles at night."
    )
    index_documents(document_ids=[doc.pk])
    # Corrupt the copy on purpose: the postings claim the team-readable collection.
    KeywordPosting.objects.filter(document_id=doc.pk).update(collection_id=cast.handbook.pk)
    assert keyword_titles(cast.bob, "voles") == []


def keyword_columns_of(document) -> list[tuple[int, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT chunk_index, search_vector::text, doc_length FROM document_embeddings WHERE document_id = %s ORDER BY chunk_index",
            [document.pk],
        )
        return cursor.fetchall()


def test_a_new_chunk_is_written_once_with_the_keyword_columns_a_refresh_would_give_it(cast):
    """Filled in by an UPDATE after the insert, a chunk row would be written twice (its HNSW entry too)."""
    doc = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Field guide",
        text="# Owls\n\n## Barn owls\n\nThey hunt voles at night. " + "Quiet wings. " * 80 + "\n\n## Tawny owls\n\nThey call.",
    )

    def writes() -> tuple[int, int]:
        """Rows inserted into and updated in the chunks' table by this transaction so far."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'document_embeddings'")
            return cursor.fetchone()

    before = writes()
    index_documents(document_ids=[doc.pk])
    after = writes()
    inserted, updated = after[0] - before[0], after[1] - before[1]
    written = keyword_columns_of(doc)
    assert len(written) > 1 and inserted == len(written) and updated == 0
    assert all(length > 0 for _, _, length in written)
    # A heading above a chunk that the chunk does not contain is among its keywords, with weight B.
    assert any("'owl':3B" in vector for _, vector, _ in written)

    refresh_search_vectors(document_ids=[doc.pk])
    assert keyword_columns_of(doc) == written
    assert postings_of(doc) == expected_postings(doc)
