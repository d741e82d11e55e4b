"""The /rag page in headless Chromium against gunicorn: sign in, ask, watch the answer stream, follow a citation.

Also: a document holding a <script> and remote images (markdown and HTML) never becomes markup anywhere,
and the browser neither runs nor fetches anything from it. CAIRN_UPDATE_SCREENSHOT=1 saves the answered
page as docs/rag-page.png (the README's screenshot).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from documents.management.commands.setup_demo import ACME_QUESTIONS, DEMO_DIR
from rag.indexing.pipeline import index_documents
from tests.browser import CHROMIUM, CHROMIUM_ARGS, Pixel
from tests.factories import DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"


def rag_page_server(tmp_path: Path, *, llm_delay: str) -> GunicornServer:
    # Bag-of-words fake embeddings score a short question against a whole page low; the threshold
    # is lowered to match (the evidence gate itself is tested in tests/rag/test_answers.py).
    return GunicornServer(
        log_path=tmp_path / "gunicorn.log", extra_env={"RAG_FAKE_LLM_DELAY": llm_delay, "RAG_ANSWER_MIN_SCORE": "0.05"}
    ).start()


@pytest.fixture
def server(tmp_path):
    """The fake LLM writes slowly enough for the page to show an answer while it streams."""
    server = rag_page_server(tmp_path, llm_delay="0.04")
    yield server
    server.stop()


@pytest.fixture
def quick_server(tmp_path):
    """The fake LLM writes at once: a conversation's answers need not be watched as they stream."""
    server = rag_page_server(tmp_path, llm_delay="0")
    yield server
    server.stop()


@pytest.fixture
def library(cast, tracker):
    for name in ("handbook-onboarding.md", "handbook-remote.md", "handbook-security.md"):
        text = (DEMO_DIR / name).read_text()
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=text.splitlines()[0].lstrip("# "), text=text)
    hostile = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title='Pixel policy <img src="' + tracker + '/title.png">',
        text=(
            "# Pixel policy\n\nThe pixel policy forbids tracking images <script>window.__pwned = 1</script> such as "
            f'![tracker]({tracker}/markdown.png) or <img src="{tracker}/html.png" onerror="window.__pwned = 2">.\n'
        ),
    )
    from documents.models import Document

    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    cast.bob.set_password(PASSWORD)
    cast.bob.save()
    cast.bob.team.example_questions = ACME_QUESTIONS
    cast.bob.team.save()
    return hostile


def test_ask_on_the_rag_page_and_follow_a_citation_to_the_highlighted_passage(cast, library, server, tracker):
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    csp_violations, requests, console, dialogs = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda message: console.append(message.text))
        try:
            ask_and_follow(page, server, tracker, csp_violations, requests, dialogs)
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nconsole: {console}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()

    assert not Pixel.hits and not [url for url in requests if url.startswith(tracker)], "a remote image was fetched"
    assert not csp_violations, csp_violations
    assert not dialogs, dialogs
    from rag.models import Feedback

    assert Feedback.objects.get().comment == "Exactly right"


def ask_and_follow(page, server, tracker, csp_violations, requests, dialogs):
    from playwright.sync_api import expect

    page.on("console", lambda message: csp_violations.append(message.text) if "Content Security Policy" in message.text else None)
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(f"{server.url}/rag")
    assert "/login?next=/rag" in page.url
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/rag")
    expect(page.locator("#empty")).to_be_visible()
    expect(page.locator("button.example")).to_have_count(4)

    page.locator("button.example", has_text="How many vacation days do I get?").click()
    # Streaming: text shows up while the answer is still being written ...
    page.wait_for_function(
        "() => { const a = document.querySelector('#answer');"
        " return a.classList.contains('streaming') && a.textContent.length > 0; }"
    )
    # ... and the finished answer has its citation links and sources.
    citation = page.locator("#answer a.cite").first
    expect(citation).to_be_visible()
    expect(page.locator("#answer")).to_contain_text("25 days of paid vacation")
    expect(page.locator("#empty")).to_be_hidden()
    sources = page.locator("#sources li")
    expect(sources.first).to_contain_text("Onboarding")
    expect(sources.first).to_contain_text("score")
    expect(page.locator("#status")).to_contain_text("confidence")
    expect(page.locator("#feedback")).to_be_visible()
    screenshot = (
        ROOT / "docs" / "rag-page.png" if os.environ.get("CAIRN_UPDATE_SCREENSHOT") else server.log_path.with_name("rag-page.png")
    )
    page.screenshot(path=str(screenshot), full_page=True)

    page.locator("#feedback button.rate[data-rating='5']").click()
    page.fill("#comment", "Exactly right")
    page.click("#send-feedback")
    expect(page.locator("#feedback-status")).to_have_text("Thanks for the feedback.")

    citation.click()
    page.wait_for_url("**/doc/**#passage")
    # The page renders the Markdown; the passage is marked piece by piece, the first piece is the anchor.
    passage = page.locator("mark#passage")
    expect(passage).to_be_visible()
    expect(page.locator("mark.passage", has_text="25 days of paid vacation")).to_be_visible()
    expect(page.locator(".doc-text h2", has_text="Time off")).to_be_visible()
    assert passage.evaluate(
        "element => { const r = element.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"
    )

    # A hostile document: shown as text on the page, in the sources and on its document page.
    page.goto(f"{server.url}/rag")
    page.fill("#query", "What does the pixel policy say about tracking images?")
    page.keyboard.press("Enter")
    expect(page.locator("#answer a.cite").first).to_be_visible()
    expect(page.locator("#answer")).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.locator("#answer")).to_contain_text(f"![tracker]({tracker}/markdown.png)")
    expect(page.locator("#sources")).to_contain_text('Pixel policy <img src="')
    assert page.locator("#answer script, #answer img, #sources img, #sources script").count() == 0
    page.locator("#sources a", has_text="Pixel policy").click()
    page.wait_for_url("**/doc/**")
    expect(page.locator(".doc-text")).to_contain_text("<script>window.__pwned = 1</script>")
    assert page.locator("main script, main img").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def sign_in_as_bob(page, server) -> None:
    page.goto(f"{server.url}/rag")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/rag")


def ask_on_the_page(page, question: str) -> None:
    from playwright.sync_api import expect

    page.fill("#query", question)
    page.keyboard.press("Enter")
    expect(page.locator("#question")).to_have_text(question)
    expect(page.locator("#feedback")).to_be_visible()  # shown once the `done` event arrived


def test_a_conversation_on_the_rag_page_keeps_its_thread_and_reopens_from_the_list(cast, library, quick_server):
    from playwright.sync_api import sync_playwright

    from rag.models import Conversation

    Conversation.objects.create(user=cast.alice, team=cast.alice.team, title="Alice's question about laptops")
    csp_violations, errors = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on(
            "console", lambda message: csp_violations.append(message.text) if "Content Security Policy" in message.text else None
        )
        # No request of the page may fail, the browser's own for the icon included.
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            converse(page, quick_server)
        except Exception:
            page.screenshot(path=str(quick_server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{quick_server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()

    assert not csp_violations, csp_violations
    assert not errors, errors
    vacation = Conversation.objects.get(user=cast.bob, title="How many vacation days do I get?")
    assert list(vacation.turns.order_by("created_at").values_list("query", flat=True)) == [
        "How many vacation days do I get?",
        "How do I request them?",
        "And are public holidays extra?",
    ]
    assert Conversation.objects.filter(user=cast.bob).count() == 2


def converse(page, server):
    from playwright.sync_api import expect

    sign_in_as_bob(page, server)
    expect(page.locator("#no-conversations")).to_be_visible()  # alice's conversation is not bob's
    ask_on_the_page(page, "How many vacation days do I get?")
    expect(page.locator("#answer")).to_contain_text("25 days of paid vacation")
    expect(page.locator("#conversations button.open")).to_have_count(1)
    assert "?c=" in page.url

    # A follow-up: the first turn moves up into the thread, the follow-up is searched standing alone.
    ask_on_the_page(page, "How do I request them?")
    expect(page.locator("#thread .turn")).to_have_count(1)
    expect(page.locator("#thread .turn .question")).to_have_text("How many vacation days do I get?")
    expect(page.locator("#thread .turn .answer")).to_contain_text("25 days of paid vacation")
    expect(page.locator("#thread .turn a.cite").first).to_be_visible()
    expect(page.locator("#searched")).to_have_text("Searched as: How do I request them? (How many vacation days do I get?)")
    expect(page.locator("#answer a.cite").first).to_be_visible()
    expect(page.locator("#conversations button.open .when")).to_contain_text("2 questions")
    # On a wide screen too, each conversation's rename and delete buttons sit inside the list, not clipped off it.
    listed, rename = (
        page.locator("#conversations").bounding_box(),
        page.locator("#conversations button.icon").first.bounding_box(),
    )
    assert listed and rename and rename["x"] + rename["width"] <= listed["x"] + listed["width"], (listed, rename)
    assert page.evaluate(
        "(() => { const l = document.querySelector('#conversations'); return l.scrollWidth <= l.clientWidth; })()"
    )

    # Reloading reopens the conversation from the address: both turns in the thread.
    page.reload()
    expect(page.locator("#thread .turn")).to_have_count(2)
    expect(page.locator("#thread .turn .question").nth(1)).to_have_text("How do I request them?")
    expect(page.locator("#result")).to_be_hidden()
    expect(page.locator("#conversations button.open[aria-current=true]")).to_have_count(1)

    # A new conversation clears the thread; its question starts a second conversation.
    page.click("#new-conversation")
    expect(page.locator("#thread .turn")).to_have_count(0)
    expect(page.locator("#empty")).to_be_visible()
    assert "?c=" not in page.url
    ask_on_the_page(page, "When are the core hours for remote work?")
    expect(page.locator("#thread .turn")).to_have_count(0)
    expect(page.locator("#searched")).to_be_hidden()
    expect(page.locator("#conversations button.open")).to_have_count(2)
    expect(page.locator("#conversations button.open").first).to_contain_text("When are the core hours for remote work?")
    expect(page.locator("#conversations button.open[aria-current=true]")).to_contain_text("core hours")

    # Reopened from the list, the first conversation shows its thread and takes another follow-up.
    page.locator("#conversations button.open", has_text="How many vacation days do I get?").click()
    expect(page.locator("#thread .turn")).to_have_count(2)
    expect(page.locator("#result")).to_be_hidden()
    ask_on_the_page(page, "And are public holidays extra?")
    expect(page.locator("#thread .turn")).to_have_count(2)
    expect(page.locator("#conversations button.open").first).to_contain_text("3 questions")


def test_stop_regenerate_and_copy_an_answer_then_rename_and_delete_its_conversation_on_a_phone(cast, library, server):
    from playwright.sync_api import sync_playwright

    from rag.models import Conversation, QueryLog

    csp_violations, errors, asked = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 390, "height": 844})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        page = context.new_page()
        page.on(
            "console", lambda message: csp_violations.append(message.text) if "Content Security Policy" in message.text else None
        )
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda r: asked.append(r.post_data_json) if r.url.endswith("/api/rag.answer") else None)
        try:
            copied = control_answers(page, server, asked)
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(f"page {page.url}:\n{page.content()}\nserver log:\n{server.log_path.read_text()[-4000:]}")
            raise
        finally:
            browser.close()

    assert not csp_violations, csp_violations
    assert not errors, errors
    # (The database is read only now: Django refuses it in the thread Playwright's event loop runs in.)
    stopped, regenerated, again, reopened = QueryLog.objects.filter(user=cast.bob).order_by("created_at")
    # Stopped: the server noticed the reader left, so the answer is no conversation's turn (nor cached: the
    # regenerated one came from the LLM). Had it been written to the end, it would be a conversation of its own.
    assert (stopped.error, stopped.conversation) == ("client disconnected", None)
    assert (asked[0], asked[1]) == (
        {"query": stopped.query, "stream": True},
        {"query": stopped.query, "stream": True, "fresh": True},
    )
    assert (asked[2]["fresh"], asked[2]["replaces"]) == (True, str(regenerated.pk)), "the answered turn is replaced"
    assert (asked[3]["fresh"], asked[3]["replaces"]) == (True, str(again.pk))
    assert regenerated.error == again.error == reopened.error == ""
    assert f"{server.url}/doc/{regenerated.citations[0]['document']['id']}?v=" in copied
    assert not Conversation.objects.filter(user=cast.bob).exists(), "deleted"


def fits_the_phone(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways"


def control_answers(page, server, asked) -> str:
    """Stop, regenerate (thrice), copy, rename and delete on the page; what was copied."""
    from playwright.sync_api import expect

    question = "How many vacation days do I get?"
    sign_in_as_bob(page, server)
    page.fill("#query", question)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#answer.streaming').textContent.length > 0")
    page.click("#stop")
    expect(page.locator("#status")).to_contain_text("Stopped. This partial answer is not kept in the conversation.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#regenerate")).to_be_focused()
    expect(page.locator("#feedback")).to_be_hidden()
    expect(page.locator("#no-conversations")).to_be_visible()

    # Regenerate (the focused button, by keyboard): the same question answered afresh, starting a conversation.
    page.keyboard.press("Enter")
    expect(page.locator("#stop")).to_be_focused()
    expect(page.locator("#feedback")).to_be_visible()
    expect(page.locator("#answer")).to_contain_text("25 days of paid vacation")
    expect(page.locator("#conversations button.open")).to_have_count(1)
    fits_the_phone(page)

    # Copy: the answer with its sources, as text.
    page.click("#copy")
    expect(page.locator("#copy-status")).to_have_text("Copied with its sources.")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert (
        "25 days of paid vacation a year, plus public holidays. [1]" in copied
        and "\n\nSources:\n- [1] Onboarding (lines " in copied
    )

    # Regenerating an answered question replaces its turn.
    page.click("#regenerate")
    expect(page.locator("#feedback")).to_be_visible()
    expect(page.locator("#conversations button.open .when")).to_contain_text("1 question")
    expect(page.locator("#thread .turn")).to_have_count(0)

    # Reopened, the conversation's newest answer can be regenerated from the thread.
    page.reload()
    expect(page.locator("#thread .turn")).to_have_count(1)
    page.get_by_role("button", name=f"Answer “{question}” again").click()
    expect(page.locator("#feedback")).to_be_visible()
    expect(page.locator("#thread .turn")).to_have_count(0)
    expect(page.locator("#conversations button.open .when")).to_contain_text("1 question")
    assert len(asked) == 4

    # Rename in place: the field takes focus, Enter saves, focus returns to the conversation.
    page.get_by_role("button", name=f"Rename “{question}”").click()
    title = page.get_by_role("textbox", name="New title")
    expect(title).to_be_focused()
    expect(title).to_have_value(question)
    fits_the_phone(page)
    title.fill("Vacation rules")
    title.press("Enter")
    renamed = page.locator("#conversations button.open")
    expect(renamed).to_have_text(re.compile("^Vacation rules"))
    expect(renamed).to_be_focused()
    expect(page.locator("#list-status")).to_have_text("Renamed to “Vacation rules”.")

    # Delete after confirming: the open conversation goes, and the page starts afresh.
    page.get_by_role("button", name="Delete “Vacation rules”").click()
    expect(page.get_by_role("button", name="Cancel")).to_be_focused()
    page.get_by_role("group", name="Delete “Vacation rules”").get_by_role("button", name="Delete").click()
    expect(page.locator("#no-conversations")).to_be_visible()
    expect(page.locator("#empty")).to_be_visible()
    expect(page.locator("#result")).to_be_hidden()
    expect(page.locator("#new-conversation")).to_be_focused()
    assert "?c=" not in page.url
    return copied
