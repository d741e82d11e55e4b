"""The document page in headless Chromium on a phone's width, against gunicorn: edit with the live preview, save,
watch the new version become searchable, read the history's diff, archive and restore from the archive.

Test settings run tasks eagerly, so the server indexes a save as it commits; the page still asks the server
whether the version is indexed, as it does when a worker indexes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.db import connection

from documents import services
from rag.indexing.pipeline import index_documents
from rag.models import IndexState, IndexStatus
from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.servers import GunicornServer

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
PHONE: ViewportSize = {"width": 390, "height": 844}
TEXT = "# Deploying\n\nMerge once the quokka approves.\n\nPromote the image.\n"
NEW_TEXT = (
    "# Deploying\n\nMerge after two approvals from the zeppelin crew.\n\nPromote the image.\n\n"
    "| Step | Owner |\n| --- | --- |\n| Merge | dev |\n| Promote | ops |\n"
)


@pytest.fixture
def server(tmp_path: Path):
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


def test_edit_with_preview_then_find_the_new_version_read_its_diff_and_archive_and_restore(cast, server) -> None:
    from playwright.sync_api import expect, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    document = services.document_create(by=cast.alice, collection=cast.handbook, title="Deploying", text=TEXT, publish=True)
    index_documents(document_ids=[document.pk])
    cast.alice.set_password(PASSWORD)
    cast.alice.save()
    csp_violations: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=PHONE)
        page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)
        try:
            page.goto(f"{server.url}/doc/{document.pk}")
            assert "/login?next=" in page.url
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server.url}/doc/{document.pk}")
            assert page.locator("h1").count() == 1, "the title is shown once"

            page.click("a.button:has-text('Edit')")
            page.fill("textarea[name=text]", NEW_TEXT)
            preview = page.locator("#preview")
            expect(preview.locator("table td", has_text="ops")).to_be_visible()  # rendered by the server as you type
            expect(preview).to_contain_text("zeppelin crew")
            fits(page)
            page.click("#edit button[type=submit]")

            page.wait_for_url(f"{server.url}/doc/{document.pk}")
            expect(page.locator(".flash")).to_have_text("Saved as version 2.")
            expect(page.locator("#index-state")).to_have_text("Indexed")
            expect(page.locator(".doc-text table th", has_text="Owner")).to_be_visible()
            assert searched(page, "zeppelin") == ["Deploying"] and searched(page, "quokka") == []
            fits(page)

            # As while a worker has yet to index a save: the page says so, and asks until the worker is done.
            outside_the_browser_loop(lambda: IndexStatus.objects.filter(document_id=document.pk).update(state=IndexState.PENDING))
            page.reload()
            expect(page.locator("#index-state")).to_have_text("Indexing…")
            outside_the_browser_loop(lambda: index_documents(document_ids=[document.pk]))
            expect(page.locator("#index-state")).to_have_text("Indexed")

            page.click("#history >> text=Version 2")
            expect(page.locator(".diff li.removed")).to_have_text("Merge once the quokka approves.")
            expect(page.locator(".diff li.added").first).to_have_text("Merge after two approvals from the zeppelin crew.")
            fits(page)
            page.click("text=← Deploying")

            page.click(".actions button:has-text('Archive')")
            expect(page.locator(".doc-head .meta")).to_contain_text("archived")
            page.click(".actions button:has-text('Restore from archive')")
            expect(page.locator(".flash")).to_have_text("Restored from the archive.")
            expect(page.locator(".doc-head .meta")).not_to_contain_text("archived")
            assert searched(page, "zeppelin") == ["Deploying"]
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()
    assert not csp_violations, csp_violations


def outside_the_browser_loop(work: Callable[[], object]) -> None:
    """Run database work in a thread of its own: Django refuses it in Playwright's event loop."""

    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result()


def fits(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], f"{page.url} scrolls sideways"


def searched(page, query: str) -> list[str]:
    """The titles `rag.search` finds for the signed-in user, asked from the page as its own scripts ask the API."""
    return page.evaluate(
        """async (query) => {
            const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
            const response = await fetch("/api/rag.search", {
                method: "POST",
                headers: { "Content-Type": "application/json", "X-CSRFToken": token },
                body: JSON.stringify({ query, mode: "keyword" }),
            });
            return (await response.json()).data.map((hit) => hit.document.title);
        }""",
        query,
    )
