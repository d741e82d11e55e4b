"""The library's pages (Django test client): /documents and /collections/<id> list what the viewer may read with its
index state; /search shows rag.search's results. tests/rag/test_library_browser.py drives them in Chromium."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from documents.models import Document
from permissions.models import Access
from rag import library_pages
from rag.indexing.pipeline import index_documents
from rag.models import IndexState, IndexStatus
from rag.retrieval.search import MODES
from tests.conftest import ApiFor, Cast, SignIn
from tests.factories import CollectionFactory, DocumentFactory, TeamFactory, UserFactory


@pytest.fixture
def library(corpus: dict[str, Document]) -> dict[str, Document]:
    """The rag corpus, tagged, Volcanoes changed after Owls (so the newest first is not the title order)."""
    now = timezone.now()
    Document.objects.filter(pk=corpus["owls"].pk).update(tags=["birds", "night"], updated_at=now - timedelta(days=2))
    Document.objects.filter(pk=corpus["volcano"].pk).update(tags=["geology"], updated_at=now - timedelta(days=1))
    Document.objects.filter(pk=corpus["secret"].pk).update(tags=["birds", "secret-tag"])
    return corpus


def titles(html: str) -> list[str]:
    return re.findall(r'<a class="title" href="[^"]+">([^<]+)</a>', html)


def item(html: str, marker: str) -> str:
    """The list item holding `marker` (a document's id or a title's end), up to the item's end."""
    return html.split(marker)[1].split("\n    </li>")[0]


def hits(html: str) -> list[str]:
    return re.findall(r'<li data-hit="([^"]+)">', html)


# Browsing


def test_a_collection_page_lists_its_documents_with_their_index_state(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    response = signed_in(cast.bob).get(f"/collections/{cast.handbook.pk}")
    html = response.content.decode()
    assert response.status_code == 200
    assert titles(html) == ["Volcanoes", "Owls"], "the most recently updated first"
    assert html.count('data-state="indexed"') == 2
    assert f'href="/doc/{library["owls"].pk}"' in html
    assert '<span class="tag">geology</span>' in html and "alice" in html, "tags and author"


def test_the_sidebar_lists_only_the_collections_the_viewer_may_read_with_their_counts(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    bob = signed_in(cast.bob).get("/documents").content.decode()
    sidebar = bob.split('<nav class="sidebar"')[1].split("</nav>")[0]
    assert "Handbook" in sidebar and "Private" not in sidebar
    assert re.search(r'All documents</span><span class="n">2<', sidebar)
    alice = signed_in(cast.alice).get("/documents").content.decode()
    assert "Private" in alice and re.search(r'All documents</span><span class="n">3<', alice)


def test_another_teams_or_a_private_collection_is_the_styled_404_and_its_titles_never_appear(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    other = library["other_team"].collection
    bob = signed_in(cast.bob)
    for url in (
        f"/collections/{cast.private.pk}",
        f"/collections/{other.pk}",
        "/collections/00000000-0000-0000-0000-000000000000",
    ):
        response = bob.get(url)
        html = response.content.decode()
        assert response.status_code == 404 and "Page not found" in html, url
        assert "Secret owls" not in html and "Their owls" not in html and "Private" not in html
    listing = bob.get("/documents").content.decode()
    assert titles(listing) == ["Volcanoes", "Owls"]
    assert "Secret owls" not in listing and "Their owls" not in listing
    assert "secret-tag" not in listing, "a tag only invisible documents carry is not offered"
    assert signed_in(cast.charlie).get(f"/collections/{cast.handbook.pk}").status_code == 404


def test_a_document_shared_with_the_viewer_shows_without_naming_its_collection(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    from tests.factories import DocumentMembershipFactory

    DocumentMembershipFactory.create(document=library["secret"], user=cast.bob)
    html = signed_in(cast.bob).get("/documents").content.decode()
    assert "Secret owls" in titles(html) and "shared with you" in html
    assert "Private" not in html, "the collection bob may not read is not named"


def test_a_failed_document_shows_its_reason_and_an_unindexed_one_is_pending(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    IndexStatus.objects.filter(document=library["volcano"]).update(
        state=IndexState.FAILED, error="the embedding provider refused the key (401)"
    )
    DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Fresh")
    html = signed_in(cast.bob).get(f"/collections/{cast.handbook.pk}").content.decode()
    volcano = item(html, f'data-document="{library["volcano"].pk}"')
    assert 'data-state="failed"' in volcano
    assert "Indexing failed: the embedding provider refused the key (401)" in volcano
    fresh = item(html, "Fresh</a>")
    assert 'data-state="pending"' in fresh and "not indexed yet" in fresh


def test_a_document_changed_since_it_was_indexed_is_pending(signed_in: SignIn, cast: Cast, library: dict[str, Document]) -> None:
    Document.objects.filter(pk=library["owls"].pk).update(version=2)
    html = signed_in(cast.bob).get(f"/collections/{cast.handbook.pk}").content.decode()
    owls = item(html, f'data-document="{library["owls"].pk}"')
    assert 'data-state="pending"' in owls and "version 2 waits to be indexed" in owls


def test_the_tag_filter_keeps_documents_carrying_every_chosen_tag(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    bob = signed_in(cast.bob)
    url = f"/collections/{cast.handbook.pk}"
    assert titles(bob.get(f"{url}?tag=geology").content.decode()) == ["Volcanoes"]
    assert titles(bob.get(f"{url}?tag=birds&tag=night").content.decode()) == ["Owls"]
    html = bob.get(f"{url}?tag=birds&tag=geology").content.decode()
    assert titles(html) == [] and "No document here carries all of these tags" in html
    offered = bob.get(url).content.decode()
    assert 'data-tag="birds"' in offered and 'href="?tag=birds"' in offered, "each offered tag links to the filtered list"
    assert signed_in(cast.bob).get(f"{url}?tag=" + "x" * 60).status_code == 400


def test_the_list_sorts_by_title_or_by_last_update(signed_in: SignIn, cast: Cast, library: dict[str, Document]) -> None:
    bob = signed_in(cast.bob)
    assert titles(bob.get("/documents?sort=title").content.decode()) == ["Owls", "Volcanoes"]
    assert titles(bob.get("/documents?sort=updated").content.decode()) == ["Volcanoes", "Owls"]
    assert titles(bob.get("/documents?sort=nonsense").content.decode()) == ["Volcanoes", "Owls"]


def test_the_list_is_paged(signed_in: SignIn, cast: Cast, library: dict[str, Document], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library_pages, "PAGE_SIZE", 1)
    bob = signed_in(cast.bob)
    first = bob.get("/documents?sort=title").content.decode()
    assert titles(first) == ["Owls"] and "Page 1 of 2" in first and 'href="?sort=title&amp;page=2"' in first
    assert titles(bob.get("/documents?sort=title&page=2").content.decode()) == ["Volcanoes"]
    assert titles(bob.get("/documents?sort=title&page=99").content.decode()) == ["Volcanoes"], "past the end: the last page"


def test_an_empty_collection_says_how_to_fill_it(signed_in: SignIn, cast: Cast) -> None:
    empty = CollectionFactory.create(team=cast.alice.team, name="Empty", default_access=Access.READ)
    alice = signed_in(cast.alice).get(f"/collections/{empty.pk}").content.decode()
    assert "This collection has no documents yet" in alice and 'href="/import"' in alice, "a team admin may import into it"
    bob = signed_in(cast.bob).get(f"/collections/{empty.pk}").content.decode()
    assert "ask someone who can write to it" in bob and 'class="button" href="/import"' not in bob


def test_a_viewer_without_collections_is_told_who_can_share_one(signed_in: SignIn, db: None) -> None:
    loner = UserFactory.create(team=TeamFactory.create(name="Solo"), username="loner")
    html = signed_in(loner).get("/documents").content.decode()
    assert "No collection is shared with you yet" in html and "You cannot read any documents yet" in html


def test_the_pages_need_a_signed_in_user_and_only_get(client, signed_in: SignIn, cast: Cast) -> None:
    for url in ("/documents", f"/collections/{cast.handbook.pk}", "/search?q=owls"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login?next=")
    assert signed_in(cast.bob).post("/documents").status_code == 405


def test_the_header_links_search_and_documents(signed_in: SignIn, cast: Cast) -> None:
    DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Something to read")
    html = signed_in(cast.bob).get("/rag").content.decode()
    nav = html.split("<nav>")[1].split("</nav>")[0]
    assert '<a href="/search">Search</a>' in nav and '<a href="/documents">Documents</a>' in nav
    assert 'id="search-link"' in html, "the /rag page points to the search page too"


# Searching


@pytest.mark.parametrize("mode", MODES)
def test_the_search_page_shows_what_rag_search_returns_for_the_same_viewer_and_mode(
    signed_in: SignIn, api_for: ApiFor, cast: Cast, library: dict[str, Document], mode: str
) -> None:
    api = api_for(cast.bob).post("rag.search", {"query": "owls hunt at night", "mode": mode, "limit": 20}).json()
    html = signed_in(cast.bob).get(f"/search?q=owls+hunt+at+night&mode={mode}").content.decode()
    assert hits(html) == [hit["id"] for hit in api["data"]]
    for hit in api["data"]:
        assert f"score {hit['score']:.3f}" in html


def test_search_results_link_to_the_passage_and_mark_the_query_words(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    html = signed_in(cast.bob).get("/search?q=owls&mode=keyword").content.decode()
    owls = library["owls"]
    assert re.search(rf'<a class="title" href="/doc/{owls.pk}\?v=1&amp;start=\d+&amp;end=\d+#passage">Owls</a>', html)
    assert "<mark>Owls</mark>" in html or "<mark>owls</mark>" in html


def test_search_never_shows_another_teams_or_a_private_collections_passages(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    bob = signed_in(cast.bob)
    html = bob.get("/search?q=owls+barn+mice").content.decode()
    assert hits(html) and "Secret owls" not in html and "Their owls" not in html
    response = bob.get(f"/search?q=owls&collection={cast.private.pk}")
    assert response.status_code == 404 and "Secret owls" not in response.content.decode()
    lava = "/search?q=owls+and+lava&mode=keyword"
    assert set(titles(bob.get(lava).content.decode())) == {"Owls", "Volcanoes"}
    filtered = bob.get(f"{lava}&collection={cast.handbook.pk}&tags=geology").content.decode()
    assert titles(filtered) == ["Volcanoes"], "the collection and tag filters narrow the results"


def test_the_explanation_shows_only_when_toggled(signed_in: SignIn, cast: Cast, library: dict[str, Document]) -> None:
    bob = signed_in(cast.bob)
    plain = bob.get("/search?q=owls+hunt&mode=hybrid").content.decode()
    assert hits(plain) and "data-explain" not in plain
    assert 'id="explain-toggle" href="?q=owls+hunt&amp;mode=hybrid&amp;explain=1"' in plain
    explained = bob.get("/search?q=owls+hunt&mode=hybrid&explain=1").content.decode()
    assert hits(explained) == hits(plain)
    assert explained.count("data-explain") == len(hits(explained))
    assert "<dt>Found by</dt>" in explained and "<dt>Fused</dt>" in explained and "rank 1 · cosine" in explained


def test_a_passage_holding_markup_is_shown_as_text(signed_in: SignIn, cast: Cast) -> None:
    hostile = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Pixel <b>policy</b>",
        text='Pixels <script>alert("x")</script> track.',
    )
    index_documents(document_ids=[hostile.pk])
    html = signed_in(cast.bob).get("/search?q=pixels+track&mode=keyword").content.decode()
    assert "Pixel &lt;b&gt;policy&lt;/b&gt;" in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "<script>alert" not in html


def test_a_query_the_api_would_refuse_is_explained_on_the_page(
    signed_in: SignIn, cast: Cast, library: dict[str, Document]
) -> None:
    bob = signed_in(cast.bob)
    short = bob.get("/search?q=ow")
    assert short.status_code == 400 and "Query: must be at least 3 characters." in short.content.decode()
    mode = bob.get("/search?q=owls&mode=psychic")
    assert mode.status_code == 400 and "Mode: " in mode.content.decode()
    collection = bob.get("/search?q=owls&collection=not-an-id")
    assert collection.status_code == 400 and "Collection: " in collection.content.decode()


def test_the_search_page_says_when_nothing_is_indexed_and_when_there_is_no_query(signed_in: SignIn, db: None) -> None:
    loner = signed_in(UserFactory.create(team=TeamFactory.create(name="Solo"), username="loner"))
    html = loner.get("/search?q=owls").content.decode()
    assert 'id="nothing-indexed"' in html and 'href="/import"' in html
    assert 'id="search-help"' in loner.get("/search").content.decode()


def test_the_search_page_is_off_with_rag(signed_in: SignIn, cast: Cast, settings) -> None:
    settings.RAG_ENABLED = False
    html = signed_in(cast.bob).get("/search?q=owls").content.decode()
    assert 'id="rag-disabled"' in html
    listing = signed_in(cast.bob).get("/documents")
    assert listing.status_code == 200 and "data-state" not in listing.content.decode(), "nothing is indexed meanwhile"


def test_searches_on_the_page_count_against_the_apis_rate(
    signed_in: SignIn, api_for: ApiFor, cast: Cast, library: dict[str, Document], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rest_framework.throttling import SimpleRateThrottle

    # The throttles read their rates once, at import: patch them for this test only.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "1000/min", "anon": "10/min", "rag": "2/min"})
    assert api_for(cast.bob).post("rag.search", {"query": "owls hunt mice"}).status_code == 200
    bob = signed_in(cast.bob)
    assert bob.get("/search?q=owls+hunt+mice").status_code == 200
    refused = bob.get("/search?q=owls+hunt+mice")
    assert refused.status_code == 429 and "Too many searches: try again in" in refused.content.decode()
    assert not hits(refused.content.decode())


def test_a_longer_list_costs_no_more_queries(signed_in: SignIn, cast: Cast, library: dict[str, Document]) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    bob = signed_in(cast.bob)
    url = f"/collections/{cast.handbook.pk}"
    with CaptureQueriesContext(connection) as short:
        bob.get(url)
    more = [DocumentFactory.create(collection=cast.handbook, created_by=cast.bob, tags=["extra"]) for _ in range(8)]
    index_documents(document_ids=[d.pk for d in more])
    with CaptureQueriesContext(connection) as long:
        html = bob.get(url).content.decode()
    assert len(titles(html)) == 10
    assert len(long.captured_queries) == len(short.captured_queries)


def test_without_the_embedding_service_hybrid_says_it_ranked_by_words_and_vector_says_why_it_cannot(
    signed_in: SignIn, cast: Cast, library: dict[str, Document], settings, respx_mock
) -> None:
    from rag.providers.embeddings import reset_provider_cache

    settings.RAG_EMBEDDING_PROVIDER = "litellm_proxy"
    settings.RAG_LITELLM_BASE_URL = "http://llm.test"
    settings.RAG_EMBEDDING_MAX_RETRIES = 0
    reset_provider_cache()
    respx_mock.post("http://llm.test/embeddings").respond(503)
    bob = signed_in(cast.bob)
    hybrid = bob.get("/search?q=owls+hunt+mice").content.decode()
    assert 'id="degraded"' in hybrid and hits(hybrid) == hits(bob.get("/search?q=owls+hunt+mice&mode=keyword").content.decode())
    vector = bob.get("/search?q=owls+hunt+mice&mode=vector")
    assert vector.status_code == 503 and 'id="error"' in vector.content.decode() and not hits(vector.content.decode())
