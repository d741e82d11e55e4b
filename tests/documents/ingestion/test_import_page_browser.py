"""The /import page in headless Chromium against gunicorn: drop files, watch the job, read each file's outcome;
then a cited PDF passage on /rag links to the original at its page."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cast
from tests.documents.ingestion.files import make_pdf
from tests.documents.ingestion.test_pdf_citations import pdf as nature_pdf
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "correct horse battery"


@pytest.fixture
def server(tmp_path: Path, cast: Cast) -> Iterator[GunicornServer]:
    cast.alice.set_password(PASSWORD)
    cast.alice.save()
    server = GunicornServer(
        log_path=tmp_path / "gunicorn.log",
        extra_env={"IMPORT_STORAGE_DIR": str(tmp_path / "imports"), "RAG_ANSWER_MIN_SCORE": "0.05"},
    ).start()
    yield server
    server.stop()


DROP = """([files]) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const zone = document.getElementById("drop");
  zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
}"""


def dropped(name: str, data: bytes, kind: str = "application/octet-stream") -> dict:
    return {"name": name, "data": base64.b64encode(data).decode(), "type": kind}


def test_drop_files_on_the_import_page_and_watch_them_become_documents(cast: Cast, server: GunicornServer) -> None:
    from playwright.sync_api import expect, sync_playwright

    csp_violations: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)
        try:
            page.goto(f"{server.url}/import")
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server.url}/import")
            expect(page.locator("#submit")).to_be_disabled()

            files = [
                dropped("nature.pdf", nature_pdf(), "application/pdf"),
                dropped("notes.md", b"# Team notes\n\nWe meet on Mondays.", "text/markdown"),
                dropped("empty.md", b"", "text/markdown"),
                dropped("scan.pdf", make_pdf([[]]), "application/pdf"),
            ]
            page.evaluate(DROP, [files])
            expect(page.locator("#chosen li")).to_have_count(4)
            page.select_option("#collection", str(cast.handbook.pk))
            page.click("#submit")

            expect(page.locator("#stage")).to_have_text("Done", timeout=30_000)
            expect(page.locator("#counts")).to_have_text("4 of 4 files, 2 failed")
            rows = page.locator("#files-list li")
            expect(rows).to_have_count(4)
            expect(page.locator("#files-list li[data-outcome=created]")).to_have_count(2)
            expect(page.locator("#files-list li", has_text="empty.md")).to_contain_text("The file is empty.")
            expect(page.locator("#files-list li", has_text="scan.pdf")).to_contain_text("no extractable text")
            expect(page.locator("#files-list li", has_text="notes.md").locator("a")).to_have_text("Team notes")
            page.screenshot(path=str(server.log_path.with_name("import-page.png")), full_page=True)

            # The PDF's passages are cited with their page, and link to the original at that page.
            page.goto(f"{server.url}/rag")
            page.fill("#query", "Where do glaciers carve deep valleys?")
            page.keyboard.press("Enter")
            link = page.locator("#sources a.page").first
            expect(link).to_be_visible(timeout=30_000)
            href = link.get_attribute("href") or ""
            assert href.startswith("/doc/") and "/original?v=1#page=" in href
            response = page.request.get(f"{server.url}{href.split('#')[0]}")
            assert (response.status, response.headers["content-type"]) == (200, "application/pdf")
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()
    assert not csp_violations, csp_violations
