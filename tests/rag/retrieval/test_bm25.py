"""Keyword search's BM25 scores against a reference computed in Python over only the viewer's chunks."""

from __future__ import annotations

import math

import pytest
from django.db import connection

from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from rag.retrieval.keyword import K1, TEXT_SEARCH_CONFIG, B, keyword_ranking, keyword_relevances
from rag.retrieval.stats import scope_index_stats
from rag.retrieval.visibility import search_scope
from tests.factories import DocumentFactory

MODEL = "fake-embedding"


def reference(user, query: str) -> tuple[dict[int, float], dict[str, float], int]:
    """BM25 (k1, b as shipped) over the user's visible current chunks, computed in Python: the scores, the IDF
    of each query word they hold, and their number."""
    from documents.models import Document

    visible = dict(Document.objects.visible_to(user).values_list("id", "version"))
    chunks = [
        c for c in Chunk.objects.filter(model_id=MODEL, document_id__in=visible) if c.document_version == visible[c.document_id]
    ]
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
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms if df[t]}
    scores: dict[int, float] = {}
    for chunk_id, freqs in tf.items():
        matched = [t for t in terms if t in freqs]
        if matched:
            scores[chunk_id] = sum(
                idf[t] * freqs[t] * (K1 + 1) / (freqs[t] + K1 * (1 - B + B * lengths[chunk_id] / avgdl)) for t in matched
            )
    return scores, idf, n


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
        DocumentFactory(
            collection=cast.private if key.startswith("private") else cast.handbook, created_by=cast.alice, title=key, text=text
        )
        for key, text in texts.items()
    ]
    index_documents(document_ids=[d.pk for d in docs])
    user = getattr(cast, viewer)
    query = "owls hunting mice in barns"
    expected = reference(user, query)[0]
    scope = search_scope(user=user)
    ranking = keyword_ranking(scope=scope, query=query, model_id=MODEL, limit=50, stats=scope_index_stats(scope, model_id=MODEL))
    got = ranking.hits
    assert {h.chunk_id for h in got} == set(expected)
    for hit in got:
        assert hit.score == pytest.approx(expected[hit.chunk_id], rel=1e-9)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    # What hybrid search gives a chunk another ranking found is the same relevance, with this viewer's statistics.
    again = keyword_relevances(ranking, chunk_ids=[h.chunk_id for h in got], model_id=MODEL)
    assert again == pytest.approx({h.chunk_id: h.relevance for h in got}, rel=1e-9)


def test_a_word_no_visible_chunk_holds_leaves_the_other_words_idf_in_place(cast):
    """Each posting reads its word's IDF by the word's place in the query: a word in between that no visible
    chunk holds changes no other word's IDF, and counts in the ceiling as a word never seen."""
    docs = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=title, text=text)
        for title, text in (("a", "Owls hunt mice at night."), ("b", "Mice eat grain in the barn."), ("c", "Barn owls nest."))
    ]
    # Only alice reads this one: bob's chunks hold no "nightingale".
    docs.append(DocumentFactory(collection=cast.private, created_by=cast.alice, title="p", text="Nightingales sing to owls."))
    index_documents(document_ids=[d.pk for d in docs])
    query = "owls nightingales mice"  # its words in the query's order: mice, nightingal, owl
    expected, idf, n = reference(cast.bob, query)
    assert set(idf) == {"mice", "owl"}
    scope = search_scope(user=cast.bob)
    ranking = keyword_ranking(scope=scope, query=query, model_id=MODEL, limit=50, stats=scope_index_stats(scope, model_id=MODEL))
    assert {h.chunk_id: h.score for h in ranking.hits} == pytest.approx(expected, rel=1e-9)
    assert ranking.idf == pytest.approx(idf, rel=1e-9)
    assert ranking.ceiling == pytest.approx(sum(idf.values()) + math.log(1 + (n + 0.5) / 0.5), rel=1e-9)
    for hit in ranking.hits:
        assert hit.relevance == pytest.approx(expected[hit.chunk_id] / ranking.ceiling, rel=1e-9)
