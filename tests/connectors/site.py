"""A small web site on loopback for the crawler's tests: pages a test can change between crawls, and every
request it received (path and headers), so a test can say which requests were conditional."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Resource:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # Validators the server sends and honours: an ETag from the body, or a fixed Last-Modified instead.
    etag: bool = True
    last_modified: str | None = None


@dataclass
class Request:
    path: str
    headers: dict[str, str]

    @property
    def conditional(self) -> bool:
        return "if-none-match" in self.headers or "if-modified-since" in self.headers


def page(title: str, body: str, *links: str) -> Resource:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    html = (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f'<nav><a href="/">Home</a></nav><main><h1>{title}</h1><p>{body}</p><ul>{anchors}</ul></main>'
        "<footer>Example Corp, all rights reserved</footer></body></html>"
    )
    return Resource(html.encode())


class Site:
    """Serves `resources` by path (query included); anything else is a 404."""

    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with site.lock:
                    site.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}))
                    resource = site.resources.get(self.path)
                if resource is None:
                    self._answer(404, {"Content-Type": "text/plain"}, b"not found")
                    return
                headers = {"Content-Type": resource.content_type, **resource.headers}
                if resource.etag and resource.status == 200:
                    etag = '"' + hashlib.sha256(resource.body).hexdigest()[:16] + '"'
                    headers["ETag"] = etag
                    if self.headers.get("If-None-Match") == etag:
                        self._answer(304, {"ETag": etag}, b"")
                        return
                if resource.last_modified:
                    headers["Last-Modified"] = resource.last_modified
                    if self.headers.get("If-Modified-Since") == resource.last_modified:
                        self._answer(304, {}, b"")
                        return
                self._answer(resource.status, headers, resource.body)

            def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if status != 304:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if status != 304:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> Site:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def page_requests(self) -> list[Request]:
        """What the crawl asked for, robots.txt aside."""
        return [r for r in self.requests if r.path != "/robots.txt"]


LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)


def small_site(base: str) -> dict[str, Resource]:
    """A site with the cases a crawler meets: a redirect, a loop, a disallowed path, a binary, Latin-1, Markdown."""
    return {
        "/robots.txt": Resource(b"User-agent: *\nDisallow: /private\n", "text/plain"),
        "/": page(
            "Welcome",
            "The handbook of Example Corp.",
            "/guide",
            "/guide/",
            "/guide#install",
            "/loop/a?y=2&x=1",
            "/old",
            "/private/salaries",
            "/logo.bin",
            "/latin",
            "/notes.md",
            "/gone",
            "http://elsewhere.invalid/page",
            "mailto:someone@example.com",
        ),
        "/guide": page("Install guide", "Run the installer and answer its questions.", "/"),
        "/loop/a?x=1&y=2": page("Loop A", "A page that links to B.", "/loop/b"),
        "/loop/a?y=2&x=1": page("Loop A", "A page that links to B.", "/loop/b"),
        "/loop/b": page("Loop B", "A page that links back to A.", "/loop/a?x=1&y=2", "/loop/b/"),
        "/old": Resource(b"", status=301, headers={"Location": "/new"}, etag=False),
        "/new": page("Moved page", "This page moved here from /old."),
        "/private/salaries": page("Salaries", "Nobody should crawl this."),
        "/logo.bin": Resource(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "application/octet-stream"),
        "/latin": Resource(
            "<html><head><title>Caf\xe9 menu</title></head><body><main><h1>Caf\xe9</h1><p>Cr\xe8me br\xfbl\xe9e for dessert.</p></main></body></html>".encode(
                "latin-1"
            ),
            "text/html; charset=iso-8859-1",
            etag=False,
            last_modified=LAST_MODIFIED,
        ),
        "/notes.md": Resource(b"# Notes\n\nPlain *Markdown* notes.\n", "text/markdown"),
        "/sitemap.xml": Resource(
            (
                '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{base}/guide</loc></url><url><loc>{base}/notes.md</loc></url>"
                f"<url><loc>{base}/private/salaries</loc></url><url><loc>http://elsewhere.invalid/x</loc></url>"
                "</urlset>"
            ).encode(),
            "application/xml",
        ),
    }
