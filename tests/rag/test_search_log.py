"""The search log and the admin's views of it: zero-result queries, top queries, low-rated answers with their citations."""

from __future__ import annotations

import pytest

from rag.models import SearchLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(cast, client):
    user = type(cast.alice).objects.create_superuser("operator", password="x", team=cast.alice.team)
    client.force_login(user)
    return client


def searched(api, query: str, **body) -> SearchLog:
    response = api.post("rag.search", {"query": query, **body})
    assert response.status_code == 200, response.content
    return SearchLog.objects.latest("id")


def test_a_search_is_logged_without_its_text_by_default(cast, api_for, corpus):
    log = searched(api_for(cast.bob), "what do owls hunt")
    assert log.query == ""


def test_a_search_is_logged_with_its_mode_results_and_latency(cast, api_for, corpus):
    log = searched(api_for(cast.bob), "owls", mode="keyword")
    assert (log.user, log.team, log.mode, log.results > 0, "keyword_ms" in log.latency) == (
        cast.bob,
        cast.bob.team,
        "keyword",
        True,
        True,
    )


def test_a_search_is_logged_with_its_text_when_rag_log_queries_is_on(settings, cast, api_for, corpus):
    settings.RAG_LOG_QUERIES = True
    assert searched(api_for(cast.bob), "What do owls hunt").query == "What do owls hunt"


def test_the_admin_lists_the_searches_that_found_nothing(settings, cast, api_for, corpus, operator):
    settings.RAG_LOG_QUERIES = True
    bob = api_for(cast.bob)
    searched(bob, "zebrafish migration", mode="keyword")
    searched(bob, "owls", mode="keyword")
    listing = operator.get("/admin/rag/searchlog/?results=zero").content.decode()
    assert "zebrafish migration" in listing and ">owls<" not in listing


def test_the_admin_ranks_the_most_frequent_queries_case_folded(settings, cast, api_for, corpus, operator):
    settings.RAG_LOG_QUERIES = True
    bob = api_for(cast.bob)
    for query in ("Owls at night", "owls at night", "volcano ash"):
        searched(bob, query, mode="keyword")
    rows = list(operator.get("/admin/rag/searchlog/top/").context["rows"])
    assert [(r["text"], r["searches"]) for r in rows] == [("owls at night", 2), ("volcano ash", 1)]


def test_the_top_queries_can_be_only_those_that_found_nothing(settings, cast, api_for, corpus, operator):
    settings.RAG_LOG_QUERIES = True
    bob = api_for(cast.bob)
    searched(bob, "zebrafish", mode="keyword")
    searched(bob, "owls", mode="keyword")
    rows = list(operator.get("/admin/rag/searchlog/top/?zero=1").context["rows"])
    assert [r["text"] for r in rows] == ["zebrafish"]


def test_the_top_queries_page_says_when_texts_are_not_logged(cast, api_for, corpus, operator):
    searched(api_for(cast.bob), "owls", mode="keyword")
    page = operator.get("/admin/rag/searchlog/top/").content.decode()
    assert "RAG_LOG_QUERIES is off" in page and "1 search(es) in this period were logged without their text" in page


def test_the_top_queries_page_is_for_staff_only(cast, client):
    client.force_login(cast.bob)
    assert client.get("/admin/rag/searchlog/top/").status_code == 302


def rated_answer(api, query: str, rating: int) -> str:
    answer_id = api.post("rag.answer", {"query": query}).json()["data"]["id"]
    assert api.post("rag.feedback", {"answerId": answer_id, "rating": rating}).status_code == 200
    return answer_id


def test_the_admin_lists_low_rated_answers_only(cast, api_for, corpus, fake_llm, operator):
    bob = api_for(cast.bob)
    low = rated_answer(bob, "What do owls hunt at night?", 1)
    high = rated_answer(bob, "When do volcanoes erupt?", 5)
    listing = operator.get("/admin/rag/querylog/?rating=low").content.decode()
    assert (f"/admin/rag/querylog/{low}/change/" in listing, f"/admin/rag/querylog/{high}/change/" in listing) == (True, False)


def test_a_listed_answer_names_the_documents_it_cited(cast, api_for, corpus, fake_llm, operator):
    rated_answer(api_for(cast.bob), "What do owls hunt at night?", 1)
    listing = operator.get("/admin/rag/querylog/?rating=low").content.decode()
    assert '<td class="field-cited">Owls</td>' in listing


def test_an_answer_shows_its_cited_passages(cast, api_for, corpus, fake_llm, operator):
    answer_id = rated_answer(api_for(cast.bob), "What do owls hunt at night?", 1)
    detail = operator.get(f"/admin/rag/querylog/{answer_id}/change/").content.decode()
    assert "Owls hunt mice at night" in detail and f'href="/doc/{corpus["owls"].pk}' in detail
