"""The web connector against a small site served on loopback: scope, robots.txt, conditional requests, limits, errors."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from connectors.base import ItemError, PreviousItem, SourceError, SourceItem
from connectors.kinds.web import WebConnector, normalise_url
from connectors.models import SourceSync, SyncedSource
from connectors.services import source_create
from documents.models import Document
from tests.conftest import Cast
from tests.connectors.conftest import SyncAndIndex, embedded_texts
from tests.connectors.site import Request, Resource, Site, page, small_site


@pytest.fixture(scope="module")
def served() -> Iterator[Site]:
    server = Site().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def site(served: Site) -> Site:
    """The module's server with the small site laid anew and no requests recorded."""
    served.resources = small_site(served.url)
    served.requests.clear()
    return served


@dataclass(frozen=True)
class FirstCrawl:
    items: dict[str, SourceItem]
    requests: list[Request]


@pytest.fixture(scope="module")
def first(served: Site) -> FirstCrawl:
    """One crawl of the small site as laid, for the tests that only read what it found (a crawl each would cost)."""
    served.resources = small_site(served.url)
    served.requests.clear()
    return FirstCrawl(crawl(connector(served)), list(served.requests))


def connector(site: Site, path: str = "/", secrets: Mapping[str, str] | None = None, **config: Any) -> WebConnector:
    return WebConnector.from_config({"url": site.url + path, **config}, secrets or {})


def crawl(web: WebConnector, previous: Mapping[str, PreviousItem] | None = None) -> dict[str, SourceItem]:
    return {item.key: item for item in web.items(previous or {})}


def remembered(items: Mapping[str, SourceItem]) -> dict[str, PreviousItem]:
    """What the sync stores after a crawl: each item's version and state."""
    return {key: PreviousItem(version=item.version, state=item.state) for key, item in items.items()}


def counts(sync: SourceSync) -> tuple[int, int, int, int, int, int]:
    return (sync.seen, sync.created, sync.changed, sync.unchanged, sync.deleted, sync.failed)


def paths(site: Site, items: Mapping[str, SourceItem]) -> set[str]:
    return {key.removeprefix(site.url) for key in items}


def test_it_crawls_the_pages_of_the_site_once_each_within_its_origin_and_robots_txt(served: Site, first: FirstCrawl) -> None:
    assert paths(served, first.items) == {"/", "/guide", "/loop/a?x=1&y=2", "/loop/b", "/new", "/logo.bin", "/latin", "/notes.md"}


def test_it_ends_a_link_loop_and_requests_each_page_once(first: FirstCrawl) -> None:
    requested = [r.path for r in first.requests if r.path.startswith("/loop/")]
    assert sorted(requested) == ["/loop/a?y=2&x=1", "/loop/b"], "each spelling of a loop's pages read once"


def test_it_never_requests_a_path_robots_txt_disallows(first: FirstCrawl) -> None:
    assert [r for r in first.requests if r.path.startswith("/private")] == []


def test_a_page_keeps_its_title_and_only_its_main_text(served: Site, first: FirstCrawl) -> None:
    guide = first.items[served.url + "/guide"]

    text = guide.fetch().decode()
    assert (guide.title, "Run the installer" in text, "all rights reserved" in text) == ("Install guide", True, False)


def test_a_redirected_page_is_keyed_by_where_it_landed(served: Site, first: FirstCrawl) -> None:
    moved = first.items[served.url + "/new"]

    assert (moved.origin, moved.state["aliases"]) == (served.url + "/new", [served.url + "/old"])


def test_a_binary_is_an_item_error_without_being_downloaded_whole(served: Site, first: FirstCrawl) -> None:
    logo = first.items[served.url + "/logo.bin"]

    with pytest.raises(ItemError, match="application/octet-stream, which Cairn does not index"):
        logo.fetch()


def test_a_latin_1_page_is_read_by_its_declared_charset(served: Site, first: FirstCrawl) -> None:
    latin = first.items[served.url + "/latin"]

    assert (latin.title, "Crème brûlée" in latin.fetch().decode()) == ("Café menu", True)


def test_markdown_goes_to_the_parsers_as_markdown(served: Site, first: FirstCrawl) -> None:
    notes = first.items[served.url + "/notes.md"]

    assert (notes.name, notes.fetch()) == ("notes.md", b"# Notes\n\nPlain *Markdown* notes.\n")


def test_an_unchanged_site_answers_only_conditional_requests_with_the_stored_versions(site: Site, first: FirstCrawl) -> None:
    again = crawl(connector(site), remembered(first.items))

    unconditional = [r.path for r in site.page_requests() if not r.conditional]
    versions = {k: i.version for k, i in first.items.items()}
    assert (unconditional, {k: i.version for k, i in again.items()}) == (["/gone"], versions)


def test_a_changed_page_gets_a_new_version_and_a_removed_one_is_no_longer_listed(site: Site) -> None:
    web = connector(site)
    first = crawl(web)
    site.resources["/guide"] = page("Install guide", "Run the new installer.", "/", "/faq")
    site.resources["/faq"] = page("FAQ", "Questions people ask.")
    del site.resources["/notes.md"]

    again = crawl(connector(site), remembered(first))

    changed = {k.removeprefix(site.url) for k in again if k in first and again[k].version != first[k].version}
    assert (changed, paths(site, again) - paths(site, first), paths(site, first) - paths(site, again)) == (
        {"/guide"},
        {"/faq"},
        {"/notes.md"},
    )


def test_the_crawl_goes_on_through_a_page_that_answered_304(site: Site) -> None:
    first = crawl(connector(site))
    site.resources["/loop/b"] = page("Loop B", "Changed text.", "/loop/a?x=1&y=2")

    site.requests.clear()

    again = crawl(connector(site), remembered(first))

    through = [r for r in site.requests if r.path == "/loop/a?y=2&x=1"]
    changed = again[site.url + "/loop/b"].version != first[site.url + "/loop/b"].version
    assert ([r.conditional for r in through], changed) == ([True], True)


def test_a_sitemap_lists_the_pages_it_names_on_the_site(site: Site) -> None:
    items = crawl(connector(site, "/sitemap.xml", max_depth=0))

    assert paths(site, items) == {"/guide", "/notes.md"}


def test_a_sitemap_index_leads_to_the_pages_of_its_sitemaps(site: Site) -> None:
    site.resources["/sitemap-index.xml"] = Resource(
        (
            '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{site.url}/sitemap.xml</loc></sitemap></sitemapindex>"
        ).encode(),
        "text/xml",
    )

    items = crawl(connector(site, "/sitemap-index.xml", max_depth=0))

    assert paths(site, items) == {"/guide", "/notes.md"}


def test_include_and_exclude_patterns_choose_the_pages(site: Site) -> None:
    items = crawl(connector(site, include=["/loop/*", "/guide"], exclude=["/loop/b"]))

    assert paths(site, items) == {"/guide", "/loop/a?x=1&y=2"}


def test_max_depth_stops_the_crawl_that_many_links_from_the_start(site: Site) -> None:
    items = crawl(connector(site, max_depth=1))

    assert "/loop/b" not in paths(site, items)


def test_max_pages_stops_the_crawl_and_says_so(site: Site) -> None:
    web = connector(site, max_pages=3)

    items = crawl(web)

    assert (len(items), "stopped at max_pages (3)" in web.cursor) == (3, True)


def test_secret_headers_are_sent_to_the_site_and_kept_nowhere(site: Site) -> None:
    web = connector(site, secrets={"authorization": "Bearer s3cret-token", "headers": "X-Api-Key: k3y"})

    items = crawl(web)

    sent = site.requests[0].headers
    assert (sent["authorization"], sent["x-api-key"], "s3cret" in repr([i.state for i in items.values()])) == (
        "Bearer s3cret-token",
        "k3y",
        False,
    )


def test_a_start_page_answering_401_is_a_source_error_about_credentials(site: Site) -> None:
    site.resources["/"] = Resource(b"no", status=401)

    with pytest.raises(SourceError, match="HTTP 401.*credentials"):
        crawl(connector(site))


def test_a_start_page_robots_txt_disallows_is_a_source_error(site: Site) -> None:
    with pytest.raises(SourceError, match="robots.txt"):
        crawl(connector(site, "/private/salaries"))


def test_an_unreachable_host_is_a_transient_source_error() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    web = WebConnector.from_config({"url": f"http://127.0.0.1:{port}/"}, {})

    with pytest.raises(SourceError, match="Cannot reach") as raised:
        list(web.items({}))
    assert raised.value.transient


def test_a_site_in_a_blocked_network_is_refused_before_any_request() -> None:
    web = WebConnector.from_config({"url": "http://169.254.169.254/latest/meta-data/"}, {})

    with pytest.raises(SourceError, match="169.254.169.254, in a network Cairn does not connect to"):
        list(web.items({}))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"url": "ftp://example.com/"}, "not an http:// or https:// address"),
        ({"url": "file:///etc/passwd"}, "not an http:// or https:// address"),
        ({"url": "https://example.com/", "max_pages": 0}, "max_pages: must be a whole number"),
        ({"url": "https://example.com/", "include": "/docs"}, "include: must be a list"),
        ({"url": "https://example.com/", "depth": 2}, "Unknown field for a web source: depth"),
    ],
)
def test_a_bad_configuration_is_a_source_error_naming_the_field(config: dict[str, Any], message: str) -> None:
    with pytest.raises(SourceError, match=message):
        WebConnector.from_config(config, {})


def test_a_secret_header_with_a_line_break_is_refused_without_echoing_it() -> None:
    with pytest.raises(SourceError) as raised:
        WebConnector.from_config({"url": "https://example.com/"}, {"cookie": "a=1\r\nX-Evil: 1"})
    assert "a=1" not in raised.value.message


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTP://Example.COM:80/a/b/#top", "http://example.com/a/b"),
        ("https://example.com:443/?b=2&a=1", "https://example.com/?a=1&b=2"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com:8443/%7Euser", "https://example.com:8443/~user"),
        ("https://example.com", "https://example.com/"),
    ],
)
def test_urls_are_normalised_to_one_spelling_per_page(url: str, normal: str) -> None:
    assert normalise_url(url) == normal


# End to end: a web source syncing into a collection.


def web_source(cast: Cast, site: Site) -> SyncedSource:
    return source_create(
        by=cast.alice, name="Intranet", kind="web", config={"url": site.url + "/"}, collection=cast.handbook, sync=False
    )


def test_a_web_source_creates_updates_and_archives_its_pages_and_an_unchanged_resync_costs_nothing(
    cast: Cast, site: Site, sync_and_index: SyncAndIndex
) -> None:
    source = web_source(cast, site)

    first = sync_and_index(source)
    assert counts(first) == (8, 7, 0, 0, 0, 1)
    titles = dict(Document.objects.filter(collection=cast.handbook).values_list("origin", "title"))
    assert titles[site.url + "/guide"] == "Install guide"
    assert (first.errors[0]["key"], "does not index" in first.errors[0]["message"]) == (site.url + "/logo.bin", True)

    embedded = len(embedded_texts())
    site.requests.clear()
    again = sync_and_index(source)
    assert counts(again) == (8, 0, 0, 7, 0, 1)
    assert len(embedded_texts()) == embedded, "an unchanged re-sync embeds nothing"
    documents = set(titles)
    unconditional = {site.url + r.path for r in site.page_requests() if not r.conditional}
    assert unconditional & documents == set(), "every page that is a document was asked for conditionally"

    site.resources["/guide"] = page("Install guide", "Run the new installer, then reboot.", "/", "/faq")
    site.resources["/faq"] = page("FAQ", "Questions people ask.")
    site.resources["/notes-renamed.md"] = site.resources.pop("/notes.md")
    site.resources["/"] = page(
        "Welcome", "The handbook of Example Corp.", "/guide", "/loop/a?x=1&y=2", "/old", "/notes-renamed.md"
    )
    changed = sync_and_index(source)
    # Changed: the guide. The start page's list of links changed, its main text did not: unchanged.
    assert counts(changed) == (7, 2, 1, 4, 2, 0)
    guide = Document.objects.get(collection=cast.handbook, origin=site.url + "/guide")
    assert (guide.version, "reboot" in guide.text) == (2, True)
    archived = set(Document.objects.filter(collection=cast.handbook, archived_at__isnull=False).values_list("origin", flat=True))
    assert archived == {site.url + "/latin", site.url + "/notes.md"}


def test_a_page_that_fails_for_now_is_yielded_with_its_error_so_its_document_is_kept(site: Site) -> None:
    first = crawl(connector(site))
    site.resources["/guide"] = Resource(b"oops", "text/plain", status=503)

    guide = crawl(connector(site), remembered(first))[site.url + "/guide"]

    assert guide.version != first[site.url + "/guide"].version
    with pytest.raises(ItemError, match="answered HTTP 503"):
        guide.fetch()


def test_a_noindex_page_is_read_for_its_links_but_not_kept(site: Site) -> None:
    site.resources["/guide"] = Resource(
        b'<html><head><meta name="robots" content="noindex"><title>Hub</title></head><body><a href="/faq">FAQ</a></body></html>'
    )
    site.resources["/faq"] = page("FAQ", "Questions people ask.")

    found = paths(site, crawl(connector(site)))

    assert ("/guide" in found, "/faq" in found) == (False, True)
