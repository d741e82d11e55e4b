"""The /sources page in headless Chromium against gunicorn: add a folder source, watch it sync, ask a question
answered from it, break its path and read the error on the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import Cast
from tests.connectors.conftest import write
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"


@pytest.fixture
def exports(tmp_path: Path) -> Path:
    folder = tmp_path / "exports"
    write(
        folder / "wiki",
        {
            "guide.md": "# Deploy guide\n\nRun make deploy.\n",
            "faq.md": "# FAQ\n\nAsk in #help.\n",
            "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        },
    )
    return folder


@pytest.fixture
def server(tmp_path: Path, cast: Cast, exports: Path) -> Iterator[GunicornServer]:
    cast.alice.set_password(PASSWORD)
    cast.alice.save()
    server = GunicornServer(
        log_path=tmp_path / "gunicorn.log",
        extra_env={
            "IMPORT_STORAGE_DIR": str(tmp_path / "imports"),
            "CONNECTORS_LOCAL_ROOTS": str(exports),
            "RAG_ANSWER_MIN_SCORE": "0.05",
        },
    ).start()
    yield server
    server.stop()


def test_add_a_folder_source_watch_it_sync_then_break_its_path(cast: Cast, server: GunicornServer, exports: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    csp_violations: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)
        try:
            page.goto(f"{server.url}/sources")
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server.url}/sources")
            expect(page.locator("header.top nav a[href='/sources']")).to_have_text("Sources")
            expect(page.locator("#empty")).to_be_visible()

            page.select_option("#kind", "folder")
            page.fill("#name", "Team wiki")
            page.select_option("#collection", str(cast.handbook.pk))
            page.fill("[data-field=path]", str(exports / "wiki"))
            page.click("#save")

            row = page.locator("#sources li[data-source='Team wiki']")
            expect(row.locator(".counts")).to_contain_text("3 seen, 2 new", timeout=30_000)
            expect(row.locator(".errors")).to_contain_text("logo.png")
            expect(row).to_contain_text("Handbook")
            page.screenshot(path=str(server.log_path.with_name("sources-synced.png")), full_page=True)

            # A question answered from the synced folder cites the file it came from.
            page.goto(f"{server.url}/rag")
            page.fill("#query", "How do I run the deploy?")
            page.keyboard.press("Enter")
            expect(page.locator("#sources .origin").first).to_have_text(str(exports / "wiki" / "guide.md"), timeout=30_000)
            page.goto(f"{server.url}/sources")

            # Break the path: the next sync fails with the reason, and nothing is archived.
            row.locator("[data-action=edit]").click()
            page.fill("[data-field=path]", str(exports / "moved-away"))
            page.click("#save")
            row.locator("[data-action=sync]").click()
            expect(row.locator(".sync-error")).to_have_text(
                f"The folder {exports / 'moved-away'} does not exist or is not a folder.", timeout=30_000
            )
            page.screenshot(path=str(server.log_path.with_name("sources-failed.png")), full_page=True)

            row.locator("[data-action=pause]").click()
            expect(row.locator(".chip.paused")).to_have_text("paused")
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()
    assert not csp_violations, csp_violations
