"""Every page fits a phone (390 px: nothing off-screen, the header wraps) and follows a dark system theme."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
PAGES = ["/rag", "/search", "/documents", "/graph", "/import", f"/doc/{uuid.uuid4()}"]
DARK_BACKGROUND = "rgb(18, 21, 27)"  # --bg in templates/base.html's dark scheme


@pytest.fixture
def server(tmp_path: Path):
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


def test_each_page_fits_a_phone_and_keeps_sign_out_on_screen_in_light_and_dark(cast, server, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    cast.bob.set_password(PASSWORD)
    cast.bob.save()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=scheme)
                page = context.new_page()
                page.goto(f"{server.url}/login")
                page.fill("#id_username", "bob")
                page.fill("#id_password", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(f"{server.url}/rag")
                for path in PAGES:
                    page.goto(f"{server.url}{path}")
                    page.screenshot(path=str(tmp_path / f"{scheme}{path.replace('/', '_')}.png"), full_page=True)
                    assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{path} scrolls sideways"
                    box = page.locator("header.top button", has_text="Sign out").bounding_box()
                    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (path, box)
                    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                    assert (background == DARK_BACKGROUND) == (scheme == "dark"), (path, scheme, background)
                context.close()
        finally:
            browser.close()
