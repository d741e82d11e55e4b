"""What the browser tests share: where Chromium is, how it is started, and a would-be tracker."""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class Pixel(BaseHTTPRequestHandler):
    """A would-be tracker: counts every request that reaches it."""

    hits: list[str] = []

    def do_GET(self):
        Pixel.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/gif")
        self.end_headers()
        self.wfile.write(b"GIF89a")

    def log_message(self, *args):
        pass  # silent: the test asserts on `hits`, not on a log


@pytest.fixture
def tracker():
    """The tracker's origin; `Pixel.hits` lists what reached it."""
    Pixel.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Pixel)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
