"""A web site, crawled from a start page or a sitemap: each page's main text (trafilatura), within one origin.

The crawl is breadth-first from the start URL (or every URL of a sitemap), follows `<a href>` links that stay
on the start URL's origin, asks robots.txt before each request, and stops at `max_depth` links from the
start or `max_pages` requests. Every request for a page seen before is conditional (its ETag and
Last-Modified are kept in the item's state, with the page's links): a 304 yields the page with its stored
version, so it costs no download, no parse and no embedding, and the crawl goes on through the links it had.

A page's key is its URL normalised (no fragment, no trailing slash, sorted query, lower-case host, no
default port), so two spellings of one page are one document and a link loop ends. Secret headers (a
bearer token, a session cookie) go to the site's origin only and are never logged, stored or shown.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import logging
import posixpath
import re
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

import httpx
from django.conf import settings

from connectors.base import ConfigField, ItemError, PreviousItem, SourceError, SourceItem
from connectors.network import check_host

logger = logging.getLogger(__name__)

# The name robots.txt rules are matched against; the full User-Agent header is CONNECTORS_WEB_USER_AGENT.
ROBOTS_AGENT = "CairnBot"
DEFAULT_MAX_DEPTH = 5
DEFAULT_MAX_PAGES = 500
MAX_DEPTH_LIMIT = 50
MAX_REDIRECTS = 5
# Links kept in a page's state (to continue the crawl through it when it answers 304): enough for any
# navigation page, bounded so a page of a million links cannot bloat the sync's table.
MAX_LINKS_PER_PAGE = 2000
# Sitemaps read from one sitemap index, and URLs taken from all of them together.
MAX_SITEMAPS = 50
MAX_SITEMAP_URLS = 50_000
# Transport failures in a row after which the site is taken as down (the sync stops and retries later)
# rather than every remaining page being recorded as failed.
MAX_CONSECUTIVE_FAILURES = 5
_CONFIG_FIELDS = {"url", "max_depth", "max_pages", "include", "exclude"}
# RFC 7230's token: what a header name may be.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# What the parsers read, by the media type a server declares; anything else is not indexed.
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_SUFFIXES = {"text/markdown": ".md", "text/x-markdown": ".md", "text/plain": ".txt"}
_BINARY_SUFFIXES = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}
_XML_TYPES = {"application/xml", "text/xml"}


def normalise_url(url: str) -> str:
    """One spelling per page: lower-case scheme and host, no default port, no fragment, dot segments
    resolved, no trailing slash (except the root), the query's parameters sorted, percent-encoding uniform."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if parts.port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{parts.port}"
    path = posixpath.normpath(unquote(parts.path)) if parts.path not in ("", "/") else "/"
    path = "/" + path.lstrip("/") if path != "." else "/"
    path = quote(path, safe="/:@!$&'()*+,;=-._~")
    if len(path) > 1:
        path = path.rstrip("/")
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return urlunsplit((scheme, netloc, path, query, ""))


def origin_of(url: str) -> str:
    parts = urlsplit(normalise_url(url))
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class _Page:
    """One response the crawl read: what becomes an item, and the links to go on with."""

    final_url: str
    name: str
    version: str
    content: bytes | None = None
    title: str | None = None
    links: list[str] = field(default_factory=list)
    error: str | None = None
    index: bool = True
    follow: bool = True
    etag: str | None = None
    last_modified: str | None = None


class WebConnector:
    """A web site (or a sitemap's pages) on one origin."""

    kind: ClassVar[str] = "web"
    label: ClassVar[str] = "Web site"
    fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField(
            "url",
            "Start URL or sitemap",
            required=True,
            help="An http(s) page the crawl starts from, or a sitemap.xml; only pages on its origin are read.",
        ),
        ConfigField(
            "max_depth",
            "Link depth",
            type="number",
            default=DEFAULT_MAX_DEPTH,
            help="Links followed from the start (0: the start page, or the sitemap's pages, alone).",
        ),
        ConfigField(
            "max_pages", "Most pages", type="number", default=DEFAULT_MAX_PAGES, help="Pages requested in one sync at most."
        ),
        ConfigField(
            "include", "Only paths", type="lines", help="Path patterns to crawl, one a line, e.g. /docs/*; empty: every path."
        ),
        ConfigField("exclude", "Never paths", type="lines", help="Path patterns never requested, one a line, e.g. /blog/*."),
    )
    secret_fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("authorization", "Authorization header", help="Sent with every request to the site, e.g. Bearer <token>."),
        ConfigField("cookie", "Cookie header", help="A session cookie the site signs you in with, e.g. session=<value>."),
        ConfigField(
            "headers",
            "Other header",
            help='Another header to send, as "Name: value" (e.g. X-Api-Key: <key>); through the API, several, one a line.',
        ),
    )

    def __init__(
        self,
        *,
        url: str,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_pages: int = DEFAULT_MAX_PAGES,
        include: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.start_url = url
        self.origin = origin_of(url)
        self.max_depth = max_depth
        self.max_pages = max_pages
        self.include = include
        self.exclude = exclude
        self._secret_headers = dict(headers or {})
        self._cursor = ""

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> WebConnector:
        unknown = sorted(set(config) - _CONFIG_FIELDS)
        if unknown:
            raise SourceError(f"Unknown field for a web source: {', '.join(unknown)}.")
        url = config.get("url")
        if not isinstance(url, str) or not url.strip():
            raise SourceError("url: the start page or sitemap address is required.")
        url = url.strip()
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https"):
            raise SourceError(f"url: {url!r} is not an http:// or https:// address.")
        if not parts.hostname:
            raise SourceError(f"url: {url!r} names no host.")
        if parts.username or parts.password:
            raise SourceError("url: put credentials in the source's secret headers, not in the address.")
        max_depth = _bounded_int(config, "max_depth", DEFAULT_MAX_DEPTH, 0, MAX_DEPTH_LIMIT)
        max_pages = _bounded_int(config, "max_pages", DEFAULT_MAX_PAGES, 1, settings.CONNECTORS_WEB_MAX_PAGES)
        include = _patterns(config, "include")
        exclude = _patterns(config, "exclude")
        headers = _secret_headers(secrets)
        return cls(url=url, max_depth=max_depth, max_pages=max_pages, include=include, exclude=exclude, headers=headers)

    @property
    def cursor(self) -> str:
        return self._cursor

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        check_host(urlsplit(self.start_url).hostname or "")
        with httpx.Client(
            headers={"User-Agent": settings.CONNECTORS_WEB_USER_AGENT, **self._secret_headers},
            timeout=httpx.Timeout(settings.CONNECTORS_TIMEOUT),
            follow_redirects=False,
        ) as client:
            yield from _Crawl(self, client, previous).run()

    def _set_cursor(self, cursor: str) -> None:
        self._cursor = cursor


class _Crawl:
    """One crawl's state: the queue, what was seen, robots.txt, the previous sync's items."""

    def __init__(self, connector: WebConnector, client: httpx.Client, previous: Mapping[str, PreviousItem]) -> None:
        self.connector = connector
        self.client = client
        self.previous = previous
        # A page reached through a redirect is stored under where it landed; its old addresses lead there.
        self.aliases: dict[str, str] = {}
        for key, item in previous.items():
            for alias in item.state.get("aliases", ()) or ():
                self.aliases[normalise_url(alias)] = key
        self.robots: Any = None
        self.delay = 0.0
        self.last_request = 0.0
        self.failures_in_a_row = 0
        self.pages = 0

    def run(self) -> Iterator[SourceItem]:
        connector = self.connector
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._read_robots()
        if not self._allowed(connector.start_url):
            raise SourceError(f"robots.txt at {connector.origin} does not let {ROBOTS_AGENT} read the start URL.")
        queue: deque[tuple[str, int]] = deque()
        seen: set[str] = {normalise_url(connector.start_url)}
        yielded: set[str] = set()
        start = self._start(queue)
        if start is not None:
            seen.add(normalise_url(start.final_url))
            yield from self._emit(start, connector.start_url, 0, queue, seen, yielded)
        skipped = 0
        while queue:
            url, depth = queue.popleft()
            if normalise_url(url) in seen:
                continue
            if self.pages >= connector.max_pages:
                skipped = len({normalise_url(u) for u, _ in queue} - seen) + 1
                break
            yield from self._visit(url, depth, queue, seen, yielded)
        summary = f"crawled {self.pages} page{'s' if self.pages != 1 else ''} at {started}"
        if skipped:
            summary += f"; stopped at max_pages ({connector.max_pages}) with {skipped} more link{'s' if skipped != 1 else ''} not followed"
        logger.info("web source at %s: %s", connector.origin, summary)
        connector._set_cursor(summary)

    # The start: a page (its links seed the crawl) or a sitemap (its URLs do).

    def _start(self, queue: deque[tuple[str, int]]) -> _Page | None:
        url = self.connector.start_url
        key = normalise_url(url)
        key = self.aliases.get(key, key)
        self.pages += 1
        try:
            landed, response = self._get(url, self._conditional_headers(key), start=True)
        except httpx.TransportError as exc:
            raise SourceError(f"Cannot reach {self.connector.origin}: {_transport_reason(exc)}.", transient=True) from exc
        assert response is not None
        with closing(response):
            status = response.status_code
            if status in (401, 403):
                raise SourceError(
                    f"The start URL answered HTTP {status}: the site refuses Cairn's requests; check the source's secret headers (credentials)."
                )
            if status in (404, 410):
                raise SourceError(f"The start URL answered HTTP {status}: there is no page at {url}.")
            if status >= 500 or status == 429:
                raise SourceError(f"The start URL answered HTTP {status}; the sync will try again later.", transient=True)
            if status == 304:
                try:
                    return self._unchanged(key, landed)
                except ItemError as exc:
                    raise SourceError(f"The start URL {exc.message}.") from exc
            if status != 200:
                raise SourceError(f"The start URL answered HTTP {status}, not a page.")
            media = _media_type(response)
            if media in _XML_TYPES or (media == "application/x-gzip" and landed.endswith(".gz")) or landed.endswith(".xml"):
                try:
                    data = self._read_body(response, url)
                except ItemError as exc:
                    raise SourceError(f"The sitemap {exc.message}.") from exc
                urls = self._sitemap_urls(data, url)
                if urls is not None:
                    for found in urls:
                        queue.append((found, 0))
                    return None
                raise SourceError("The start URL is XML but not a sitemap (<urlset> or <sitemapindex>).")
            try:
                return self._read_page(response, landed, key)
            except ItemError as exc:
                raise SourceError(f"The start URL {exc.message}.") from exc

    def _sitemap_urls(self, data: bytes, url: str) -> list[str] | None:
        """The page URLs of a sitemap (following a sitemap index one level); None when `data` is no sitemap."""
        root = _xml_root(data)
        if root is None:
            return None
        tag = root.tag.rsplit("}", 1)[-1]
        if tag not in ("urlset", "sitemapindex"):
            return None
        locs = [(loc.text or "").strip() for loc in root.iter() if str(loc.tag).rsplit("}", 1)[-1] == "loc"]
        locs = [urljoin(url, loc) for loc in locs if loc]
        if tag == "urlset":
            return [loc for loc in locs if self._in_scope(loc)][:MAX_SITEMAP_URLS]
        pages: list[str] = []
        for child in [loc for loc in locs if origin_of(loc) == self.connector.origin][:MAX_SITEMAPS]:
            try:
                landed, response = self._get(child, {})
            except httpx.TransportError as exc:
                raise SourceError(f"Cannot read the sitemap {child}: {_transport_reason(exc)}.", transient=True) from exc
            if response is None:
                continue
            with closing(response):
                if response.status_code != 200:
                    raise SourceError(
                        f"The sitemap {child} answered HTTP {response.status_code}.", transient=response.status_code >= 500
                    )
                child_root = _xml_root(self._read_body(response, child))
            if child_root is None or str(child_root.tag).rsplit("}", 1)[-1] != "urlset":
                raise SourceError(f"{child}, listed in the sitemap index, is not a sitemap.")
            for loc in child_root.iter():
                if str(loc.tag).rsplit("}", 1)[-1] == "loc" and (loc.text or "").strip():
                    page = urljoin(child, loc.text.strip())
                    if self._in_scope(page):
                        pages.append(page)
        return pages[:MAX_SITEMAP_URLS]

    # One page.

    def _visit(
        self, url: str, depth: int, queue: deque[tuple[str, int]], seen: set[str], yielded: set[str]
    ) -> Iterator[SourceItem]:
        key = normalise_url(url)
        seen.add(key)
        known = self.aliases.get(key, key)
        self.pages += 1
        try:
            landed, response = self._get(url, self._conditional_headers(known))
        except httpx.TransportError as exc:
            self.failures_in_a_row += 1
            if self.failures_in_a_row >= MAX_CONSECUTIVE_FAILURES:
                raise SourceError(
                    f"{self.connector.origin} stopped answering ({MAX_CONSECUTIVE_FAILURES} requests in a row failed: "
                    f"{_transport_reason(exc)}); the sync will try again later.",
                    transient=True,
                ) from exc
            yield from self._failed(known, url, f"cannot be read: {_transport_reason(exc)}", yielded)
            return
        except ItemError as exc:
            yield from self._failed(known, url, exc.message, yielded)
            return
        self.failures_in_a_row = 0
        if response is None:  # a redirect off the site or into what robots.txt disallows
            return
        landed_key = normalise_url(landed)
        with closing(response):
            status = response.status_code
            if status in (404, 410):
                return  # gone: its document is archived
            if status == 304:
                try:
                    page = self._unchanged(known, landed)
                except ItemError as exc:
                    yield from self._failed(known, url, exc.message, yielded)
                    return
            elif status == 200:
                if landed_key != key and landed_key in seen:
                    return  # a second address of a page this crawl has already read
                try:
                    page = self._read_page(response, landed, key)
                except ItemError as exc:
                    yield from self._failed(known, url, exc.message, yielded)
                    return
            else:
                yield from self._failed(known, url, f"answered HTTP {status}", yielded)
                return
        seen.add(landed_key)
        yield from self._emit(page, url, depth, queue, seen, yielded)

    def _emit(
        self, page: _Page, url: str, depth: int, queue: deque[tuple[str, int]], seen: set[str], yielded: set[str]
    ) -> Iterator[SourceItem]:
        key = normalise_url(page.final_url)
        if page.follow and depth < self.connector.max_depth:
            for link in page.links:
                if normalise_url(link) not in seen and self._in_scope(link):
                    queue.append((link, depth + 1))
        if not page.index or key in yielded or not self._wanted(page.final_url):
            return
        yielded.add(key)
        aliases = sorted({normalise_url(url)} - {key})
        state: dict[str, Any] = {"name": page.name, "links": page.links, "title": page.title or ""}
        if page.etag:
            state["etag"] = page.etag
        if page.last_modified:
            state["last_modified"] = page.last_modified
        if aliases:
            state["aliases"] = aliases
        yield SourceItem(
            key=key,
            name=page.name,
            version=page.version,
            origin=page.final_url,
            fetch=self._fetcher(page, key),
            title=page.title or None,
            size=len(page.content) if page.content is not None else None,
            links=tuple(dict.fromkeys(normalise_url(link) for link in page.links if self._wanted(link))),
            state=state,
        )

    def _fetcher(self, page: _Page, key: str) -> Callable[[], bytes]:
        content, error, url = page.content, page.error, page.final_url

        def fetch() -> bytes:
            if error is not None:
                raise ItemError(key, error)
            if content is not None:
                return content
            # A page that answered 304 whose stored copy the sync still wants: read it whole, once.
            fresh = self._fresh(url, key)
            if fresh.error is not None or fresh.content is None:
                raise ItemError(key, fresh.error or "has no content")
            return fresh.content

        return fetch

    def _fresh(self, url: str, key: str) -> _Page:
        try:
            landed, response = self._get(url, {})
        except httpx.TransportError as exc:
            raise ItemError(key, f"cannot be read: {_transport_reason(exc)}") from exc
        if response is None:
            raise ItemError(key, "now redirects off the site")
        with closing(response):
            if response.status_code != 200:
                raise ItemError(key, f"answered HTTP {response.status_code}")
            return self._read_page(response, landed, key)

    def _unchanged(self, key: str, landed: str) -> _Page:
        """A 304: the stored version, title and links, nothing downloaded."""
        previous = self.previous.get(key)
        if previous is None:
            raise ItemError(key, "answered 304 Not Modified to a request that was not conditional")
        state = previous.state
        return _Page(
            final_url=landed,
            name=state.get("name") or _page_name(landed, ".md"),
            version=previous.version,
            title=state.get("title") or None,
            links=list(state.get("links", ())),
            etag=state.get("etag"),
            last_modified=state.get("last_modified"),
        )

    def _failed(self, key: str, url: str, message: str, yielded: set[str]) -> Iterator[SourceItem]:
        """A page that could not be read this time: an item whose fetch says why, so its document is kept."""
        if key in yielded or not self._wanted(url):
            return
        yielded.add(key)
        page = _Page(final_url=url, name=_page_name(url, ".md"), version=f"error:{message}", error=message)
        yield SourceItem(key=key, name=page.name, version=page.version, origin=url, fetch=self._fetcher(page, key))

    def _read_page(self, response: httpx.Response, landed: str, key: str) -> _Page:
        """A 200 response to what an item becomes: extracted text, a file for the parsers, or an error."""
        etag = response.headers.get("etag")
        last_modified = response.headers.get("last-modified")
        media = _media_type(response)
        if media in _HTML_TYPES:
            data = self._read_body(response, landed)
            page = _html_page(data, landed, response)
        elif media in _TEXT_SUFFIXES:
            data = self._read_body(response, landed)
            suffix = ".md" if landed.lower().endswith((".md", ".markdown")) else _TEXT_SUFFIXES[media]
            text = _decode(data, response)
            page = _Page(final_url=landed, name=_page_name(landed, suffix), version="", content=text.encode())
        elif media in _BINARY_SUFFIXES:
            data = self._read_body(response, landed)
            page = _Page(final_url=landed, name=_page_name(landed, _BINARY_SUFFIXES[media]), version="", content=data)
        else:
            # Not read: an image, an archive or a program costs no download to refuse.
            what = media or "content of no declared type"
            message = f"is {what}, which Cairn does not index"
            return _Page(
                final_url=landed,
                name=_page_name(landed, ""),
                version=f"unsupported:{what}",
                error=message,
                etag=etag,
                last_modified=last_modified,
            )
        page.etag, page.last_modified = etag, last_modified
        if page.content is not None:
            digest = hashlib.sha256((page.title or "").encode() + b"\0" + page.content).hexdigest()
            page.version = f"sha256:{digest}"
        return page

    def _read_body(self, response: httpx.Response, url: str) -> bytes:
        limit = settings.IMPORT_MAX_FILE_SIZE
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ItemError(normalise_url(url), f"is {int(declared):,} bytes, over IMPORT_MAX_FILE_SIZE ({limit:,})")
        body = bytearray()
        # The timeout bounds each wait for bytes; this bounds a server that sends them a few at a time.
        deadline = time.monotonic() + 5 * settings.CONNECTORS_TIMEOUT
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise ItemError(normalise_url(url), f"is over IMPORT_MAX_FILE_SIZE ({limit:,} bytes)")
            if time.monotonic() > deadline:
                raise ItemError(normalise_url(url), f"took more than {5 * settings.CONNECTORS_TIMEOUT:g} seconds to download")
        data = bytes(body)
        if url.endswith(".gz") and data[:2] == b"\x1f\x8b":
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                    data = unzipped.read(limit + 1)
            except (OSError, EOFError) as exc:
                raise ItemError(normalise_url(url), f"is not readable gzip: {exc}") from exc
            if len(data) > limit:
                raise ItemError(normalise_url(url), f"expands over IMPORT_MAX_FILE_SIZE ({limit:,} bytes)")
        return data

    # Requests.

    def _get(self, url: str, headers: Mapping[str, str], *, start: bool = False) -> tuple[str, httpx.Response | None]:
        """GET `url`, following redirects that stay on the origin and within robots.txt (`response` is None when one does not)."""
        for _ in range(MAX_REDIRECTS + 1):
            self._wait()
            request = self.client.build_request("GET", url, headers=dict(headers))
            response = self.client.send(request, stream=True)
            if not response.has_redirect_location:
                return url, response
            response.close()
            target = urljoin(url, response.headers.get("location", ""))
            if origin_of(target) != self.connector.origin:
                if start:
                    raise SourceError(f"The start URL redirects to {target}, another site: use that address as the start URL.")
                return url, None
            if not self._allowed(target):
                return url, None
            url = target
        raise ItemError(normalise_url(url), f"redirects more than {MAX_REDIRECTS} times")

    def _conditional_headers(self, key: str) -> dict[str, str]:
        previous = self.previous.get(key)
        if previous is None:
            return {}
        headers = {}
        if previous.state.get("etag"):
            headers["If-None-Match"] = previous.state["etag"]
        if previous.state.get("last_modified"):
            headers["If-Modified-Since"] = previous.state["last_modified"]
        return headers

    def _wait(self) -> None:
        """Keep robots.txt's Crawl-delay between requests (at most CONNECTORS_WEB_MAX_CRAWL_DELAY seconds)."""
        if self.delay:
            pause = self.last_request + self.delay - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        self.last_request = time.monotonic()

    def _read_robots(self) -> None:
        from protego import Protego

        url = f"{self.connector.origin}/robots.txt"
        try:
            _, response = self._get(url, {})
        except httpx.TransportError as exc:
            raise SourceError(f"Cannot reach {self.connector.origin}: {_transport_reason(exc)}.", transient=True) from exc
        if response is None:  # robots.txt redirected off the site: no rules of this site's to keep
            self.robots = Protego.parse("")
            return
        with closing(response):
            status = response.status_code
            if status >= 500 or status == 429:
                # RFC 9309: a server error on robots.txt means "crawl nothing" for now.
                raise SourceError(
                    f"{url} answered HTTP {status}; robots.txt must be readable to crawl. The sync will try again later.",
                    transient=True,
                )
            text = ""
            if status == 200:
                try:
                    text = _decode(self._read_body(response, url), response)
                except ItemError as exc:
                    raise SourceError(f"{url} {exc.message}.") from exc
        # Any other status (404, 401, 403...) means no rules (RFC 9309 "unavailable").
        self.robots = Protego.parse(text)
        delay = self.robots.crawl_delay(ROBOTS_AGENT) or 0
        self.delay = min(float(delay), settings.CONNECTORS_WEB_MAX_CRAWL_DELAY)

    # Scope.

    def _allowed(self, url: str) -> bool:
        return bool(self.robots.can_fetch(url, ROBOTS_AGENT))

    def _in_scope(self, url: str) -> bool:
        """A URL the crawl requests: on the origin, allowed by robots.txt, matched by include and not exclude."""
        return origin_of(url) == self.connector.origin and self._wanted(url) and self._allowed(url)

    def _wanted(self, url: str) -> bool:
        path = urlsplit(normalise_url(url))
        target = path.path + (f"?{path.query}" if path.query else "")
        if any(fnmatch.fnmatchcase(target, pattern) for pattern in self.connector.exclude):
            return False
        return not self.connector.include or any(fnmatch.fnmatchcase(target, pattern) for pattern in self.connector.include)


def _html_page(data: bytes, url: str, response: httpx.Response) -> _Page:
    """A page's main text as Markdown (trafilatura drops navigation, footers and the like), its title and links."""
    import lxml.html
    import trafilatura
    from lxml.etree import ParserError

    text = _decode(data, response)
    try:
        # lxml refuses text that still declares its bytes' encoding; it is decoded already.
        tree = lxml.html.document_fromstring(_XML_DECLARATION.sub("", text, count=1))
    except (ParserError, ValueError):
        return _Page(final_url=url, name=_page_name(url, ".md"), version="", error="is HTML that cannot be read")
    base = tree.find(".//base[@href]")
    tree.make_links_absolute(urljoin(url, base.get("href")) if base is not None else url, resolve_base_href=False)
    links: list[str] = []
    for element, attribute, link, _ in tree.iterlinks():
        if element.tag not in ("a", "area") or attribute != "href" or "nofollow" in (element.get("rel") or "").split():
            continue
        link = urlunsplit(urlsplit(link)._replace(fragment=""))
        if urlsplit(link).scheme in ("http", "https") and origin_of(link) == origin_of(url) and link not in links:
            links.append(link)
            if len(links) >= MAX_LINKS_PER_PAGE:
                break
    robots = " ".join(
        m.get("content", "")
        for m in tree.iterfind(".//meta[@name]")
        if m.get("name", "").lower() in ("robots", ROBOTS_AGENT.lower())
    ).lower()
    title_element = tree.find(".//title")
    title = " ".join((title_element.text_content() if title_element is not None else "").split())[:500]
    markdown = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown",
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        config=_trafilatura_config(),
    )
    if markdown and markdown.strip():
        content, name = markdown.strip().encode() + b"\n", _page_name(url, ".md")
    else:
        # Too little for trafilatura to call main text: the HTML parser reads the page as it is.
        content, name = text.encode(), _page_name(url, ".html")
    return _Page(
        final_url=url,
        name=name,
        version="",
        content=content,
        title=title or None,
        links=links,
        index="noindex" not in robots and "none" not in robots.split(),
        follow="nofollow" not in robots and "none" not in robots.split(),
    )


_TRAFILATURA_CONFIG: Any = None


def _trafilatura_config() -> Any:
    global _TRAFILATURA_CONFIG
    if _TRAFILATURA_CONFIG is None:
        from trafilatura.settings import use_config

        config = use_config()
        # A short page is still a page: below this trafilatura would fall back to the whole page's text.
        config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")
        config.set("DEFAULT", "MIN_OUTPUT_SIZE", "1")
        config.set("DEFAULT", "MAX_TREE_SIZE", str(settings.IMPORT_MAX_HTML_ELEMENTS))
        _TRAFILATURA_CONFIG = config
    return _TRAFILATURA_CONFIG


def _decode(data: bytes, response: httpx.Response) -> str:
    """Text by its declared charset (the Content-Type header, else a <meta charset>), else as the importer reads files."""
    from documents.ingestion.detect import decode_text
    from documents.ingestion.errors import FileRejected

    declared = response.charset_encoding
    if declared is None:
        match = _META_CHARSET.search(data[:4096])
        declared = match.group(1).decode("ascii") if match else None
    if declared:
        try:
            return data.decode(declared, errors="replace")
        except LookupError:
            pass  # an unknown charset name: read it as an undeclared page
    try:
        return decode_text(data)
    except FileRejected:
        return data.decode("utf-8", errors="replace")


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _page_name(url: str, suffix: str) -> str:
    """A file name for the parsers: the path's last segment, with the suffix that says its format."""
    segment = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]) or "index"
    segment = re.sub(r"[^\w.\-]+", "-", segment)[:200] or "index"
    if suffix and not segment.lower().endswith(suffix):
        segment = f"{segment.rsplit('.', 1)[0] if segment.lower().endswith(('.html', '.htm')) else segment}{suffix}"
    return segment


def _xml_root(data: bytes) -> Any:
    """The root element, parsed without entities, DTDs or network; None when `data` is not XML."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        return None


def _transport_reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {settings.CONNECTORS_TIMEOUT:g} seconds"
    if isinstance(exc, httpx.ConnectError):
        return f"connection failed ({exc})"
    return f"{type(exc).__name__} ({exc})"


def _secret_headers(secrets: Mapping[str, str]) -> dict[str, str]:
    """The headers the secrets name; a value is never echoed, since a secret must not reach an error message."""
    unknown = sorted(set(secrets) - {"authorization", "cookie", "headers"})
    if unknown:
        raise SourceError(f"Unknown secret for a web source: {', '.join(unknown)} (expected authorization, cookie, headers).")
    lines = [("Authorization", secrets["authorization"])] if secrets.get("authorization") else []
    if secrets.get("cookie"):
        lines.append(("Cookie", secrets["cookie"]))
    for number, line in enumerate((secrets.get("headers") or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not _HEADER_NAME.match(name.strip()):
            raise SourceError(f'headers: line {number} is not "Name: value" with a valid header name.')
        lines.append((name.strip(), value.strip()))
    headers: dict[str, str] = {}
    for name, value in lines:
        if "\r" in value or "\n" in value or not value.isprintable():
            raise SourceError(f"The secret header {name} has a value that is not one line of printable text.")
        headers[name] = value
    return headers


def _bounded_int(config: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SourceError(f"{name}: must be a whole number from {low} to {high}, got {value!r}.")
    return value


def _patterns(config: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = config.get(name, [])
    if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
        raise SourceError(f'{name}: must be a list of URL path patterns such as "/docs/*".')
    patterns = tuple(p.strip() for p in value)
    for pattern in patterns:
        if not pattern.startswith(("/", "*")):
            raise SourceError(f"{name}: {pattern!r} must start with / or * (it is matched against the URL's path).")
    return patterns
