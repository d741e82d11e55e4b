"""Keyword search's BM25 scores against a reference computed in Python over only the viewer's chunks."""

from __future__ import annotations

import math

import pytest
from django.db import connection

from rag.corpus.text_search import TEXT_SEARCH_CONFIG
from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from rag.retrieval import keyword
from rag.retrieval.keyword import K1, B, keyword_ranking, keyword_relevances
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


def _page(scores: dict[int, float], limit: int) -> list[int]:
    """The reference's page: the best `limit` chunks, ties by chunk id, as the ranking orders them."""
    return sorted(scores, key=lambda chunk_id: (-scores[chunk_id], chunk_id))[:limit]


@pytest.fixture
def barn_and_owls(cast, monkeypatch):
    """Seven of bob's eight chunks say "barn", three say "owl": with a floor of 5 chunks, "barn" is common."""
    monkeypatch.setattr(keyword, "COMMON_WORD_MIN_CHUNKS", 5)
    texts = [
        "Barn owls nest in the old barn.",
        "Owls hunt at night near the barn.",
        "Owls sleep by day.",
        "Hay is stored in the barn.",
        "The red barn stands on the hill.",
        "A barn cat sleeps in the barn loft, barn after barn.",
        "Horses rest in the barn.",
        "The barn roof leaks.",
    ]
    docs = [DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=f"x{i}", text=t) for i, t in enumerate(texts)]
    index_documents(document_ids=[d.pk for d in docs])


def rank(user, query: str, *, limit: int = 50, candidates: bool = False):
    scope = search_scope(user=user)
    stats = scope_index_stats(scope, model_id=MODEL)
    return keyword_ranking(scope=scope, query=query, model_id=MODEL, limit=limit, stats=stats, candidates=candidates)


def test_hybrid_candidates_leave_a_remembered_common_word_out_of_choosing_but_score_it(cast, barn_and_owls):
    query = "owls in the barn"
    expected, idf, _ = reference(cast.bob, query)
    # Nothing remembered yet: every posting read, the page is BM25's, and "barn" (7 chunks) is remembered.
    first = rank(cast.bob, query, candidates=True)
    assert first.left_out == ()
    assert [h.chunk_id for h in first.hits] == _page(expected, 50)
    second = rank(cast.bob, query, candidates=True)
    assert second.left_out == ("barn",)
    # Chosen by "owl": the three owl chunks, each scored with its "barn" term too, in BM25's order.
    owls = [h.chunk_id for h in first.hits][:3]
    assert [h.chunk_id for h in second.hits] == owls
    assert [h.score for h in second.hits] == pytest.approx([expected[c] for c in owls], rel=1e-9)
    assert second.idf == pytest.approx(idf, rel=1e-9) and second.ceiling == pytest.approx(first.ceiling, rel=1e-9)
    # A chunk only another ranking finds (one that says only "barn") weighs its real BM25 in hybrid search.
    barn_only = _page(expected, 50)[-1]
    relevance = keyword_relevances(second, chunk_ids=[barn_only], model_id=MODEL)
    assert relevance == pytest.approx({barn_only: expected[barn_only] / second.ceiling}, rel=1e-9)


def test_keyword_search_reads_every_posting_though_a_common_word_is_remembered(cast, barn_and_owls):
    query = "owls in the barn"
    expected = reference(cast.bob, query)[0]
    rank(cast.bob, query, candidates=True)
    ranking = rank(cast.bob, query, limit=5)
    assert ranking.left_out == ()
    assert [h.chunk_id for h in ranking.hits] == _page(expected, 5)  # two of them say only "barn"
    assert [h.score for h in ranking.hits] == pytest.approx([expected[c] for c in _page(expected, 5)], rel=1e-9)


def test_a_count_remembered_for_one_reader_is_not_used_for_another(cast, barn_and_owls):
    # Alice alone reads these: her count of "barn" is 9, bob's 7.
    private = [
        DocumentFactory(collection=cast.private, created_by=cast.alice, title=f"p{i}", text="Owls in the barn, barn owls.")
        for i in range(2)
    ]
    index_documents(document_ids=[d.pk for d in private])
    query = "owls in the barn"
    assert rank(cast.alice, query, candidates=True).left_out == ()
    assert rank(cast.alice, query, candidates=True).left_out == ("barn",)
    ranking = rank(cast.bob, query, candidates=True)
    assert ranking.left_out == ()
    expected, idf, _ = reference(cast.bob, query)
    assert ranking.idf == pytest.approx(idf, rel=1e-9)
    assert [h.chunk_id for h in ranking.hits] == _page(expected, 50)
