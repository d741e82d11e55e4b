"""The /graph page in headless Chromium against gunicorn: find an entity, see its neighbours drawn and
listed, expand a neighbour, open the passage a relation was read from and follow it to its document.

Also: nothing from a document the viewer cannot read (a private one, another team's) is listed or drawn;
a document whose title and text hold markup is shown as text; the vendored Cytoscape runs under the
strict CSP without a single violation, and no request leaves the origin.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from documents.models import Document
from rag.indexing.pipeline import index_documents
from rag.models import Entity
from tests.browser import CHROMIUM, CHROMIUM_ARGS, Pixel
from tests.factories import CollectionFactory, DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
HIDDEN = {"Project Nightjar", "Margaret Hamilton", "Boris Spassky"}

# Every CSP violation, caught by the page itself (Chromium also logs them to the console, checked too).
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""
DRAWN_NAMES = "() => window.cairnGraph.nodes().map((n) => n.data('name')).sort()"


@pytest.fixture
def server(tmp_path):
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


@pytest.fixture
def wiki(cast, tracker):
    """Bob reads the handbook: a tool, its checklist, an onboarding page that names only the checklist, a
    page whose title and text carry markup, and one naming more code identifiers than a page of results
    holds. Alice's private page and another team's page name the tool too."""
    handbook = {"collection": cast.handbook, "created_by": cast.alice}
    tool = DocumentFactory(
        **handbook,
        title="Deploy Tool",
        text="# Deploy Tool\n\nThe Deploy Tool ships every release of the API. Read the [[Release Checklist]] before "
        "you run it. Grace Hopper wrote it at Acme Labs.",
    )
    DocumentFactory(
        **handbook,
        title="Release Checklist",
        text="# Release Checklist\n\nBefore a release, ask the Platform Team to freeze merges, then run the Deploy Tool.",
    )
    DocumentFactory(
        **handbook,
        title="Onboarding",
        text="# Onboarding\n\nIn your first week, Linus Torvalds walks you through the Release Checklist.",
    )
    DocumentFactory(
        **handbook,
        title=f'Pixel notes <img src="{tracker}/title.png">',
        text=f'# Pixel notes\n\nThe Deploy Tool never loads <img src="{tracker}/text.png"> images. '
        "<script>window.__pwned = 1</script>",
    )
    DocumentFactory(
        **handbook,
        title="Feature switches",
        text="# Feature switches\n\nThe switches: " + ", ".join(f"`flag_{i:02}`" for i in range(30)) + ".",
    )
    DocumentFactory(
        collection=cast.private,
        created_by=cast.alice,
        title="Project Nightjar",
        text="# Project Nightjar\n\nProject Nightjar replaces the Deploy Tool next year. Margaret Hamilton leads it.",
    )
    DocumentFactory(
        collection=CollectionFactory(team=cast.charlie.team),
        created_by=cast.charlie,
        title="Deploy Tool",
        text="# Deploy Tool\n\nThe Deploy Tool of another team is run by Boris Spassky.",
    )
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    cast.bob.set_password(PASSWORD)
    cast.bob.save()
    return SimpleNamespace(
        tool=tool,
        nightjar=Entity.objects.get(team=cast.alice.team, name="Project Nightjar"),
        theirs=Entity.objects.get(team=cast.charlie.team, name="Boris Spassky"),
    )


def test_the_private_page_is_in_alices_graph_and_not_in_bobs(cast, api_for, wiki):
    """The control for the browser test: the hidden names are really in the graph, for someone allowed."""
    tool = api_for(cast.alice).post("graph.entities", {"query": "deploy tool"}).json()["data"][0]
    alice_sees = {
        n["entity"]["name"] for n in api_for(cast.alice).post("graph.entity", {"id": tool["id"]}).json()["data"]["neighbours"]
    }
    bob_sees = {
        n["entity"]["name"] for n in api_for(cast.bob).post("graph.entity", {"id": tool["id"]}).json()["data"]["neighbours"]
    }
    assert "Project Nightjar" in alice_sees
    assert not HIDDEN & bob_sees


def test_explore_the_graph_page_from_a_search_to_a_passage(cast, wiki, server, tracker):
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    seen = SimpleNamespace(console=[], requests=[], errors=[], dialogs=[])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.add_init_script(RECORD_CSP_VIOLATIONS)
        page.on("console", lambda message: seen.console.append(message.text))
        page.on("request", lambda request: seen.requests.append(request.url))
        page.on("pageerror", lambda error: seen.errors.append(str(error)))
        page.on("dialog", lambda dialog: (seen.dialogs.append(dialog.message), dialog.dismiss()))
        try:
            explore(page, server, wiki)
        except Exception:
            page.screenshot(path=str(server.log_path.with_name("failure.png")), full_page=True)
            print(
                f"page {page.url}:\n{page.content()}\nconsole: {seen.console}\nserver log:\n{server.log_path.read_text()[-4000:]}"
            )
            raise
        finally:
            browser.close()

    assert not [text for text in seen.console if "Content Security Policy" in text], seen.console
    assert not seen.errors, seen.errors
    assert not seen.dialogs, seen.dialogs
    assert not Pixel.hits and not [url for url in seen.requests if not url.startswith(server.url)], "a request left the origin"
    assert any("/static/rag/vendor/cytoscape/cytoscape.min.js" in url for url in seen.requests)


def explore(page, server, wiki):
    from playwright.sync_api import expect

    page.goto(f"{server.url}/graph")
    assert "/login?next=/graph" in page.url
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/graph")

    # The most mentioned entities are listed before anything is typed; a search narrows them.
    expect(page.locator("#entities button.entity").first).to_be_visible()
    expect(page.locator("#entities")).not_to_contain_text("Nightjar")
    page.fill("#query", "flag")
    page.click("#submit")
    expect(page.locator("#entities-status")).to_contain_text("named like “flag”")
    expect(page.locator("#entities li")).to_have_count(25)
    page.click("#more")
    expect(page.locator("#entities li")).to_have_count(30)
    expect(page.locator("#more")).to_be_hidden()
    page.fill("#query", "deploy")
    page.click("#submit")
    expect(page.locator("#entities-status")).to_contain_text("named like “deploy”")
    tool = page.locator("#entities button.entity", has_text="Deploy Tool").first
    expect(tool).to_contain_text("mentions in")

    # Choosing it draws it and its neighbours, and lists them beside the drawing.
    tool.click()
    page.wait_for_url("**/graph?entity=*")
    expect(page.locator("#focus-name")).to_have_text("Deploy Tool")
    drawn = page.evaluate(DRAWN_NAMES)
    assert {"Deploy Tool", "Release Checklist", "Grace Hopper", "Acme Labs"} <= set(drawn), drawn
    assert any(name.startswith("Pixel notes <img") for name in drawn), drawn
    assert "Onboarding" not in drawn, "Onboarding names the checklist, not the tool"
    assert not HIDDEN & set(drawn), drawn
    neighbours = page.locator("#neighbours")
    expect(neighbours).to_contain_text("Release Checklist")
    expect(neighbours).to_contain_text("LINKS_TO")
    for name in HIDDEN:
        expect(neighbours).not_to_contain_text(name)
    assert page.locator("main img, main script").count() == 0

    # Clicking a node adds its own neighbours to the drawing.
    click_node(page, "Release Checklist")
    expect(page.locator("#neighbours-heading")).to_have_text("Neighbours of Release Checklist")
    page.wait_for_function("() => window.cairnGraph.nodes().some((n) => n.data('name') === 'Onboarding')")
    drawn = page.evaluate(DRAWN_NAMES)
    assert {"Onboarding", "Linus Torvalds", "Deploy Tool", "Grace Hopper"} <= set(drawn), drawn
    assert not HIDDEN & set(drawn), drawn
    expect(neighbours).to_contain_text("Onboarding")

    # Clicking a relation opens the passage it was read from, as text, linked to its document.
    click_edge(page, "Deploy Tool", "LINKS_TO", "Release Checklist")
    expect(page.locator("#relation")).to_contain_text("Deploy Tool — LINKS_TO → Release Checklist")
    expect(page.locator("#passage-text")).to_contain_text("Read the [[Release Checklist]] before you run it.")
    link = page.locator("#passage-link")
    expect(link).to_have_text("Deploy Tool")
    assert link.get_attribute("href").startswith(f"/doc/{wiki.tool.pk}?v=1&start=")

    # The list does the same from the keyboard: back to the tool, then the passage of a relation.
    neighbours.get_by_role("button", name="Deploy Tool", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page.locator("#neighbours-heading")).to_have_text("Neighbours of Deploy Tool")
    pixel = page.locator("#neighbours li", has_text="Pixel notes <img").first
    pixel.locator("button.passage-button").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#passage-text")).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.locator("#passage-link")).to_contain_text('Pixel notes <img src="')
    assert page.locator("main img, main script").count() == 0
    page.screenshot(path=str(server.log_path.with_name("graph-page.png")), full_page=True)

    # Following the link highlights the passage on the document page.
    page.locator("#passage-link").click()
    page.wait_for_url("**/doc/**#passage")
    # The page renders the Markdown, so the passage is marked piece by piece; the first is the anchor.
    expect(page.locator("mark#passage")).to_be_visible()
    expect(page.locator("mark.passage", has_text="The Deploy Tool never loads")).to_be_visible()
    assert page.evaluate("() => window.__pwned") is None

    # An entity only a private page or another team names does not exist for bob.
    for entity in (wiki.nightjar, wiki.theirs):
        page.goto(f"{server.url}/graph?entity={entity.pk}")
        expect(page.locator("#error")).to_contain_text("not mentioned in any document you can read")
        assert page.evaluate(DRAWN_NAMES) == []
        expect(page.locator("#neighbours li")).to_have_count(0)
    page.fill("#query", "nightjar")
    page.click("#submit")
    expect(page.locator("#entities-status")).to_contain_text("No entity in the documents you can read")
    expect(page.locator("#entities li")).to_have_count(0)

    # A link with no entity id in it says so, and the page still works.
    page.goto(f"{server.url}/graph?entity=not-an-id")
    expect(page.locator("#error")).to_have_text("This link does not name an entity.")

    # So does a lost connection.
    page.route("**/api/graph.entity", lambda route: route.abort())
    page.locator("#entities button.entity").first.click()
    expect(page.locator("#error")).to_have_text("The connection to the server was lost. Please try again.")
    assert page.evaluate("() => window.__cspViolations") == []


def click_node(page, name: str) -> None:
    """A real click on the canvas, where Cytoscape drew the node."""
    x, y = page.evaluate(
        """(name) => {
            const node = window.cairnGraph.nodes().filter((n) => n.data('name') === name)[0];
            const box = document.getElementById('graph').getBoundingClientRect(), at = node.renderedPosition();
            return [box.left + at.x, box.top + at.y];
        }""",
        name,
    )
    page.mouse.click(x, y)


def click_edge(page, source: str, predicate: str, target: str) -> None:
    """A real click on the middle of the relation's line."""
    x, y = page.evaluate(
        """([source, predicate, target]) => {
            const edge = window.cairnGraph.edges().filter((e) =>
                e.data('sourceName') === source && e.data('predicate') === predicate && e.data('targetName') === target)[0];
            const box = document.getElementById('graph').getBoundingClientRect(), at = edge.renderedMidpoint();
            return [box.left + at.x, box.top + at.y];
        }""",
        [source, predicate, target],
    )
    page.mouse.click(x, y)
