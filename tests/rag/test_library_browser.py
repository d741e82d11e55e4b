"""The library's pages in headless Chromium against gunicorn, on a phone's width: open a collection, read its index
states, filter by a tag, search, toggle the explanation and follow a result to its passage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from documents.models import Document
from rag.indexing.pipeline import index_documents
from rag.models import IndexState, IndexStatus
from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import Cast
from tests.factories import DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
WIDTH = 390


@pytest.fixture
def server(tmp_path: Path):
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


@pytest.fixture
def shelf(cast: Cast) -> dict[str, Document]:
    deploy = (
        "# Deploying\n\nMerge after two approvals.\n\n## Rollback\n\nTo roll back a release, redeploy the previous image tag."
    )
    docs = {
        "deploy": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Deploying the API", text=deploy, tags=["ops"]
        ),
        "lunch": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Lunch menu", text="Soup on Mondays.", tags=["office"]
        ),
        "broken": DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title="Scanned contract", text="Unreadable.", tags=["legal"]
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    IndexStatus.objects.filter(document=docs["broken"]).update(state=IndexState.FAILED, error="the provider timed out")
    cast.bob.set_password(PASSWORD)
    cast.bob.save()
    return docs


def test_browse_a_collection_filter_by_tag_search_explain_and_open_the_passage(cast: Cast, shelf, server) -> None:
    from playwright.sync_api import expect, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    csp_violations: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 844})
        page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)

        def fits() -> None:
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{page.url} scrolls sideways"

        try:
            page.goto(f"{server.url}/documents")
            page.fill("#id_username", "bob")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server.url}/documents")
            page.locator(".sidebar a", has_text="Handbook").click()
            page.wait_for_url(f"{server.url}/collections/{cast.handbook.pk}")
            fits()
            broken = page.locator(f'li[data-document="{shelf["broken"].pk}"]')
            expect(broken.locator(".state")).to_have_text("failed")
            expect(broken.locator(".reason")).to_have_text("Indexing failed: the provider timed out")
            expect(page.locator(f'li[data-document="{shelf["deploy"].pk}"] .state')).to_have_text("indexed")
            expect(page.locator("#documents > li")).to_have_count(3)

            page.locator('#tag-filter a[data-tag="ops"]').click()
            expect(page.locator("#documents > li")).to_have_count(1)
            expect(page.locator("#documents .title")).to_have_text("Deploying the API")
            expect(page.locator('#tag-filter a[data-tag="ops"]')).to_have_attribute("aria-pressed", "true")

            page.fill("#find", "roll back a release")
            page.keyboard.press("Enter")
            page.wait_for_url("**/search?**")
            fits()
            expect(page.locator("#collection")).to_have_value(str(cast.handbook.pk))
            first = page.locator("#results > li").first
            expect(first.locator(".title")).to_have_text("Deploying the API")
            expect(first.locator(".snippet mark").first).to_be_visible()
            expect(page.locator("[data-explain]")).to_have_count(0)

            page.click("#explain-toggle")
            expect(first.locator("[data-explain]")).to_contain_text("Found by")
            expect(page.locator("input[name=explain]")).to_be_checked()
            fits()

            first.locator(".title").click()
            page.wait_for_url("**/doc/**#passage")
            expect(page.locator("mark#passage")).to_be_visible()
            expect(page.locator("mark.passage", has_text="redeploy the previous image tag")).to_be_visible()
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()
    assert not csp_violations, csp_violations
