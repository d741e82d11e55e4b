"""Keyword search's inverted index (postings) and its BM25 scores against a reference computation."""
from __future__ import annotations

import math

import pytest
from django.db import connection

from documents.services import document_delete
from rag import indexing, search
from rag.keyword import B, K1, TEXT_SEARCH_CONFIG
from rag.models import DocumentEmbedding, KeywordPosting
from tests.factories import DocumentFactory

MODEL = "fake-embedding"


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
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls",
                          text="# Owls\n\nOwls hunt mice at night. Owls are quiet hunters.")
    indexing.index_documents(document_ids=[doc.pk])
    first = postings_of(doc)
    assert first == expected_postings(doc)
    assert ("owl" in {lexeme for _, lexeme, _, _ in first}) and any(tf >= 3 for _, lexeme, tf, _ in first if lexeme == "owl")

    doc.text, doc.version = "# Volcanoes\n\nVolcanoes erupt molten lava.", doc.version + 1
    doc.save()
    indexing.index_documents(document_ids=[doc.pk])
    second = postings_of(doc)
    assert second == expected_postings(doc)
    assert {version for *_, version in second} == {doc.version}
    assert "mice" not in {lexeme for _, lexeme, _, _ in second}, "the old chunks' postings went with them"

    from rag.keyword import refresh_title

    doc.title = "Fire mountains"
    doc.save()
    refresh_title(doc.pk)
    assert "mountain" in {lexeme for _, lexeme, _, _ in postings_of(doc)}
    assert postings_of(doc) == expected_postings(doc)

    document_delete(document=doc, by=cast.alice)
    indexing.remove_document_chunks(document_ids=[doc.pk])
    assert not KeywordPosting.objects.filter(document_id=doc.pk).exists()


def reference_bm25(user, query: str) -> dict[int, float]:
    """BM25 (k1, b as shipped) over the user's visible current chunks, computed in Python."""
    from documents.models import Document

    visible = dict(Document.objects.visible_to(user).values_list("id", "version"))
    chunks = [c for c in DocumentEmbedding.objects.filter(model_id=MODEL, document_id__in=visible) if c.document_version == visible[c.document_id]]
    with connection.cursor() as cursor:
        cursor.execute("SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s))", [TEXT_SEARCH_CONFIG, query])
        terms = [r[0] for r in cursor.fetchall()]
        tf: dict[int, dict[str, int]] = {}
        for chunk in chunks:
            cursor.execute("SELECT lexeme, cardinality(positions) FROM unnest(%s::tsvector)", [chunk.search_vector])
            tf[chunk.pk] = dict(cursor.fetchall())
    n = len(chunks)
    avgdl = max(sum(c.doc_length for c in chunks) / n, 1.0)
    lengths = {c.pk: c.doc_length for c in chunks}
    df = {t: sum(t in tf[c] for c in tf) for t in terms}
    scores: dict[int, float] = {}
    for chunk_id, freqs in tf.items():
        matched = [t for t in terms if t in freqs]
        if matched:
            scores[chunk_id] = sum(
                math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * freqs[t] * (K1 + 1)
                / (freqs[t] + K1 * (1 - B + B * lengths[chunk_id] / avgdl))
                for t in matched
            )
    return scores


@pytest.mark.parametrize("viewer", ["alice", "bob"])
def test_bm25_scores_match_a_reference_over_only_the_viewers_chunks(cast, viewer):
    texts = {
        "handbook": "Owls hunt mice at night. Barn owls nest in old barns.",
        "handbook2": "Mice eat grain in the barn. Cats chase mice.",
        "handbook3": "Volcanoes erupt lava; lava cools into basalt.",
        # Only alice sees these: they must change bob's document frequencies not at all.
        "private": "Owls owls owls. Secret owls hunt secret mice in the private barn.",
        "private2": "Owls and more owls, mice and more mice.",
    }
    docs = [
        DocumentFactory(collection=cast.private if key.startswith("private") else cast.handbook, created_by=cast.alice, title=key, text=text)
        for key, text in texts.items()
    ]
    indexing.index_documents(document_ids=[d.pk for d in docs])
    user = getattr(cast, viewer)
    query = "owls hunting mice in barns"
    expected = reference_bm25(user, query)
    got = search.keyword_ranking(user=user, query=query, model_id=MODEL, limit=50)
    assert {h.chunk_id for h in got} == set(expected)
    for hit in got:
        assert hit.score == pytest.approx(expected[hit.chunk_id], rel=1e-9)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
