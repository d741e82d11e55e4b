"""The signs of each chunk's vector, which vector search scans in narrow scopes, follow the chunk and its document."""

from __future__ import annotations

from django.db import connection

from documents.models import Document
from documents.services import document_delete
from rag.indexing.pipeline import index_documents, remove_document_chunks
from rag.models import Chunk, ChunkSignBits
from tests.factories import DocumentFactory


def signs(values) -> str:
    """One bit per dimension, 1 where the value is positive (pgvector's binary_quantize), computed here."""
    return "".join("1" if float(x) > 0 else "0" for x in values)


def sign_bits_of(document) -> set[tuple[int, str, int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT chunk_id, collection_id::text, document_version, bits::text FROM chunk_sign_bits WHERE document_id = %s",
            [document.pk],
        )
        return set(cursor.fetchall())


def expected_sign_bits(document) -> set[tuple[int, str, int, str]]:
    document.refresh_from_db()
    return {
        (chunk.pk, str(document.collection_id), chunk.document_version, signs(chunk.embedding))
        for chunk in Chunk.objects.filter(document=document)
    }


def test_each_chunk_gets_the_signs_of_its_vector_and_they_follow_new_versions_and_removal(cast):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, text="# Owls\n\nOwls hunt mice at night. " * 40)
    index_documents(document_ids=[doc.pk])
    first = sign_bits_of(doc)
    assert len(first) == Chunk.objects.filter(document=doc).count() > 1
    assert first == expected_sign_bits(doc)
    assert {len(bits) for *_, bits in first} == {384}

    doc.text, doc.version = "# Volcanoes\n\nVolcanoes erupt molten lava.", doc.version + 1
    doc.save()
    index_documents(document_ids=[doc.pk])
    assert sign_bits_of(doc) == expected_sign_bits(doc)
    assert {version for _, _, version, _ in sign_bits_of(doc)} == {doc.version}

    document_delete(document=doc)
    remove_document_chunks(document_ids=[doc.pk])
    assert not ChunkSignBits.objects.filter(document_id=doc.pk).exists()


def test_the_sign_bits_follow_a_document_that_moves_and_a_vector_rewritten_in_place(cast):
    doc = DocumentFactory(collection=cast.private, created_by=cast.alice, text="# Owls\n\nOwls hunt voles at night.")
    index_documents(document_ids=[doc.pk])
    # A move as the admin makes it (a plain save), then back through a queryset update (no signals).
    doc.collection = cast.handbook
    doc.save()
    assert {collection for _, collection, _, _ in sign_bits_of(doc)} == {str(cast.handbook.pk)}
    Document.objects.filter(pk=doc.pk).update(collection=cast.private)
    assert {collection for _, collection, _, _ in sign_bits_of(doc)} == {str(cast.private.pk)}

    chunk = Chunk.objects.filter(document=doc).first()
    flipped = [-x for x in chunk.embedding]
    Chunk.objects.filter(pk=chunk.pk).update(embedding=flipped)
    assert (chunk.pk, str(cast.private.pk), doc.version, signs(flipped)) in sign_bits_of(doc)
    assert sign_bits_of(doc) == expected_sign_bits(doc)
