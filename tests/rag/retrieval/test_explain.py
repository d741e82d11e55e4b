"""rag.search `explain`: each hit's rank and score in every ranking that found it, among visible candidates only."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.management import call_command

from rag.indexing.pipeline import index_documents
from rag.retrieval.explain import explain_hits
from rag.retrieval.fusion import relevance_fusion
from rag.retrieval.hits import Hit
from rag.retrieval.search import search
from tests.factories import CollectionFactory, DocumentFactory

QUESTION = "When did the director of film The Organization (Film) die?"
ALL_MODES = ["vector", "keyword", "graph", "hybrid"]
RANKING_FIELDS = ["vectorRank", "vectorScore", "keywordRank", "keywordScore", "keywordRelevance", "graphRank", "graphScore"]


@pytest.fixture
def films(cast):
    """Bob reads these: a film names its director, whose page gives the date; a third page shares words only."""
    docs = [
        DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="The Organization (Film)",
            text="The Organization is a 1971 thriller film directed by Don Medford.",
        ),
        DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Don Medford",
            text="He was an American television and film director. He died on December 12, 2012.",
        ),
        DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Another Film",
            text="A film about the death of a director, with no link to anything.",
        ),
    ]
    index_documents(document_ids=[d.pk for d in docs])
    return docs


def explained(api, mode: str, **body) -> list[dict]:
    response = api.post("rag.search", {"query": QUESTION, "mode": mode, "threshold": 0, "explain": True, **body})
    assert response.status_code == 200, response.content
    return [{"id": hit["id"], "score": hit["score"], **hit["explain"]} for hit in response.json()["data"]]


def test_explain_hits_reads_ranks_and_scores_from_the_rankings_and_splits_the_fused_score():
    vector = [Hit(chunk_id=1, score=0.9, relevance=0.9), Hit(chunk_id=2, score=0.5, relevance=0.5)]
    keyword = [Hit(chunk_id=2, score=7.5, relevance=0.75)]
    weights = {"vector": 2.0, "keyword": 1.0}
    fused = relevance_fusion([[(h.chunk_id, h.relevance) for h in r] for r in (vector, keyword)], weights=list(weights.values()))
    hits = [Hit(chunk_id=chunk_id, score=score) for chunk_id, score in fused]
    explain_hits(hits, {"vector": vector, "keyword": keyword}, weights=weights)
    by_id = {hit.chunk_id: hit.explanation for hit in hits}
    assert by_id[2].found_by == ["vector", "keyword"]
    assert (by_id[2].places["vector"].rank, by_id[2].places["keyword"].rank) == (2, 1)
    assert by_id[2].places["keyword"].score == 7.5 and by_id[2].places["keyword"].relevance == 0.75
    assert by_id[2].contributions == pytest.approx({"vector": 2 * 0.5 / 3, "keyword": 0.75 / 3})
    assert sum(by_id[2].contributions.values()) == pytest.approx(by_id[2].fused)
    assert by_id[1].found_by == ["vector"] and by_id[1].contributions["keyword"] == 0.0


def test_a_single_ranking_explains_with_its_own_rank_and_score_and_no_fusion():
    hits = [Hit(chunk_id=5, score=3.0, relevance=0.3), Hit(chunk_id=6, score=1.0, relevance=0.1)]
    explain_hits(hits, {"keyword": hits})
    assert [(h.explanation.places["keyword"].rank, h.explanation.places["keyword"].score) for h in hits] == [(1, 3.0), (2, 1.0)]
    assert hits[0].explanation.fused is None and hits[0].explanation.contributions is None


def test_without_explain_the_hits_carry_nothing_and_the_response_keeps_its_shape(cast, api_for, films):
    assert all(hit.explanation is None for hit in search(user=cast.bob, query=QUESTION, threshold=0).hits)
    item = api_for(cast.bob).post("rag.search", {"query": QUESTION, "threshold": 0}).json()["data"][0]
    assert "explain" not in item


def test_a_hybrid_hit_shows_its_place_in_each_ranking_and_the_fused_score(cast, api_for, films):
    hits = explained(api_for(cast.bob), "hybrid")
    film = next(hit for hit in hits if hit["foundBy"] == ["vector", "keyword", "graph"])
    assert film["fusedScore"] == film["score"]
    assert film["vectorRank"] >= 1 and film["keywordRank"] >= 1 and film["graphRank"] >= 1
    assert 0 < film["vectorScore"] <= 1 and film["keywordScore"] > 0 and 0 < film["keywordRelevance"] <= 1
    assert set(film["contributions"]) == {"vector", "keyword", "graph"}
    assert sum(film["contributions"].values()) == pytest.approx(film["fusedScore"], abs=1e-5)


@pytest.mark.parametrize(
    ("mode", "rank", "score"),
    [("vector", "vectorRank", "vectorScore"), ("keyword", "keywordRank", "keywordScore"), ("graph", "graphRank", "graphScore")],
)
def test_a_single_mode_hit_is_explained_by_that_mode_alone(cast, api_for, films, mode, rank, score):
    hits = explained(api_for(cast.bob), mode)
    assert hits, f"{mode} found nothing"
    assert [hit[rank] for hit in hits] == list(range(1, len(hits) + 1))
    assert [hit[score] for hit in hits] == [hit["score"] for hit in hits]
    assert all(hit["foundBy"] == [mode] and hit["fusedScore"] is None and hit["contributions"] is None for hit in hits)
    others = [field for field in RANKING_FIELDS if not field.startswith(mode)]
    assert all(hit[field] is None for hit in hits for field in others)


def test_a_degraded_hybrid_search_explains_its_keyword_ranking(cast, api_for, films, settings, respx_mock):
    from rag.providers.embeddings import reset_provider_cache

    settings.RAG_EMBEDDING_PROVIDER, settings.RAG_LITELLM_BASE_URL = "litellm_proxy", "http://llm.test"
    settings.RAG_EMBEDDING_MAX_RETRIES = 0
    reset_provider_cache()
    respx_mock.post("http://llm.test/embeddings").respond(503)
    response = api_for(cast.bob).post("rag.search", {"query": QUESTION, "explain": True})
    assert response.json()["degraded"] is True
    assert {tuple(hit["explain"]["foundBy"]) for hit in response.json()["data"]} == {("keyword",)}


@pytest.fixture
def alices_private_matches(cast):
    """Documents bob may not read that match the question better than anything he reads: private to alice
    in his own team, and in another team. Their titles appear in none of bob's documents."""

    def add() -> None:
        docs = [
            DocumentFactory.create(
                collection=cast.private,
                created_by=cast.alice,
                title=f"Medford notes {n}",
                text="The Organization film director Don Medford died. The director of the film died in December. "
                "Director, film, death, died, Organization, Medford, thriller.",
            )
            for n in range(3)
        ]
        docs.append(
            DocumentFactory.create(
                collection=CollectionFactory(team=cast.charlie.team),
                created_by=cast.charlie,
                title="The Organization (Film)",
                text="When did the director of film The Organization die? Don Medford directed the film and died.",
            )
        )
        index_documents(document_ids=[d.pk for d in docs])
        cache.clear()  # the cached scope sizes too: every statistic is counted again

    return add


@pytest.mark.parametrize("mode", ALL_MODES)
def test_bobs_ranks_and_scores_do_not_move_when_documents_he_cannot_read_are_added(
    cast, api_for, films, alices_private_matches, mode
):
    bob, alice = api_for(cast.bob), api_for(cast.alice)
    bob_before, alice_before = explained(bob, mode), explained(alice, mode)
    assert bob_before
    alices_private_matches()
    assert explained(bob, mode) == bob_before
    # The same additions do move the ranking of alice, who reads them: the comparison above can fail.
    assert explained(alice, mode) != alice_before


# A private document's title written in text bob reads: the title automaton and link_title_mentions
# record it on bob's chunk, flagged title_only, and no graph query may count it for bob
# (rag.retrieval.graph_policy): neither his ranks nor graph.entities may tell him the words are a title.
@pytest.fixture
def private_title_in_bobs_text(cast):
    def add() -> None:
        # "thriller film" is written in The Organization (Film), which bob reads.
        private = DocumentFactory.create(collection=cast.private, created_by=cast.alice, title="Thriller Film", text="Notes.")
        index_documents(document_ids=[private.pk])
        cache.clear()

    return add


@pytest.mark.parametrize("mode", ["graph", "hybrid"])
def test_bobs_graph_ranks_do_not_move_when_a_private_title_names_words_he_reads(
    cast, api_for, films, private_title_in_bobs_text, mode
):
    bob = api_for(cast.bob)
    before = explained(bob, mode)
    private_title_in_bobs_text()
    assert explained(bob, mode) == before


def test_bob_is_not_told_that_words_he_reads_are_a_private_documents_title(cast, api_for, films, private_title_in_bobs_text):
    private_title_in_bobs_text()
    found = api_for(cast.bob).post("graph.entities", {"query": "thriller film"}).json()["data"]
    assert [entity["kind"] for entity in found] in ([], ["name"], ["topic"])


def test_bm25_statistics_are_those_of_the_visible_chunks(cast, api_for, films, alices_private_matches):
    """Document frequency, N and the average length are counted over bob's visible chunks: alice's private
    chunks, holding the query words many times, change neither bob's scores nor his relevance scale."""
    bob = api_for(cast.bob)
    before = {hit["id"]: (hit["keywordScore"], hit["keywordRelevance"]) for hit in explained(bob, "keyword")}
    alices_private_matches()
    assert {hit["id"]: (hit["keywordScore"], hit["keywordRelevance"]) for hit in explained(bob, "keyword")} == before


def test_charlie_sees_no_rank_of_acmes_documents(cast, api_for, films):
    theirs = DocumentFactory(
        collection=CollectionFactory(team=cast.charlie.team), created_by=cast.charlie, title="Films", text="A film director died."
    )
    index_documents(document_ids=[theirs.pk])
    hits = explained(api_for(cast.charlie), "hybrid")
    assert hits and {hit["id"].split(":")[0] for hit in hits} == {str(theirs.pk)}


def test_rag_query_prints_the_explanation(cast, films, capsys):
    call_command("rag_query", "bob", QUESTION, "--explain", "--threshold", "0")
    out = capsys.readouterr().out
    assert "vector #1 " in out and "keyword #" in out and "graph #" in out and " · fused " in out
    call_command("rag_query", "bob", QUESTION, "--explain", "--mode", "keyword")
    out = capsys.readouterr().out
    assert "keyword #1 " in out and "vector" not in out.split("\n", 1)[1] and "fused" not in out


def test_hybrid_weighs_the_real_relevance_of_a_chunk_a_rankings_top_list_cut(cast, api_for, films, monkeypatch):
    """Fusion counts each candidate's evidence in every ranking, not 0 where one ranking's list stopped short of it."""
    from rag.retrieval import search as search_module

    bob = api_for(cast.bob)
    cosine = {hit["id"]: hit["vectorScore"] for hit in explained(bob, "vector", limit=10)}
    bm25 = {hit["id"]: hit["keywordRelevance"] for hit in explained(bob, "keyword", limit=10)}
    real_vector, real_keyword = search_module.vector_ranking, search_module.keyword_ranking
    # Each ranking's list cut to its best chunk: every other candidate is one that list did not hold.
    monkeypatch.setattr(search_module, "vector_ranking", lambda **kw: real_vector(**kw)[:1])
    monkeypatch.setattr(
        search_module, "keyword_ranking", lambda **kw: real_keyword(**kw)._replace(hits=real_keyword(**kw).hits[:1])
    )
    hits = explained(bob, "hybrid", limit=10)
    cut = [hit for hit in hits if hit["vectorRank"] is None]
    assert cut and all(hit["contributions"]["vector"] > 0 for hit in cut)
    vector_share = [hit["contributions"]["vector"] / cosine[hit["id"]] for hit in hits]
    keyword_share = [hit["contributions"]["keyword"] / bm25[hit["id"]] for hit in hits if bm25.get(hit["id"])]
    # One weight / total for every hit, found in that ranking's list or not: the real relevance counted
    # (the API rounds scores to six digits).
    for shares in (vector_share, keyword_share):
        assert shares and min(shares) > 0 and max(shares) == pytest.approx(min(shares), rel=1e-4)
    for hit in hits:
        assert sum(hit["contributions"].values()) == pytest.approx(hit["fusedScore"], abs=1e-5)
