"""Team administration in headless Chromium on a phone-sized screen, against gunicorn: a team admin makes a
private collection and shares it with a group, makes and revokes an API token, and deletes a collection
through its confirmation step."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from documents.models import Collection, CollectionMembership, Document
from permissions.models import ApiToken
from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import Cast
from tests.factories import DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery"
WIDTH = 390


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


def test_a_team_admin_shares_a_private_collection_with_a_group_manages_a_token_and_deletes_a_collection(
    cast: Cast, server: GunicornServer
) -> None:
    from playwright.sync_api import Page, expect, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    cast.alice.set_password(PASSWORD)
    cast.alice.save()
    handbook_page = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Leave policy")

    def fits(page: Page) -> None:
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{page.url} scrolls sideways"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": WIDTH, "height": 844})
            page = context.new_page()
            page.goto(f"{server.url}/login?next=/team/groups")
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server.url}/team/groups")

            # A group, with bob in it.
            page.fill("#create-group input[name=name]", "Ops")
            page.click("#create-group button[type=submit]")
            page.select_option("#member", label="bob")
            page.click("#add-member button[type=submit]")
            expect(page.locator("#members")).to_contain_text("bob")
            fits(page)

            # A private collection, shared with the group.
            page.click("nav.subnav >> text=Collections")
            page.fill("#create-collection input[name=name]", "Board")
            page.select_option("#create-collection select[name=default_access]", "none")
            page.click("#create-collection button[type=submit]")
            expect(page.locator("h1")).to_have_text("Board")
            page.select_option("#grantee", label="Ops")
            page.select_option("#share-role", "read")
            page.click("#share button[type=submit]")
            expect(page.locator("#grants")).to_contain_text("Ops")
            fits(page)

            # A token: shown once, copied, working, then revoked.
            page.click("header.top >> text=Tokens")
            page.fill("#create-token input[name=name]", "laptop")
            page.click("#create-token button[type=submit]")
            secret = page.input_value("#token-secret")
            page.click("#copy")
            expect(page.locator("#copy")).to_have_text("Copied")
            fits(page)
            api = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
            assert httpx.post(f"{server.url}/api/collections.list", headers=api, content="{}").status_code == 200
            page.goto(f"{server.url}/account/tokens")
            assert secret not in page.content()
            page.click("#tokens button:has-text('Revoke')")
            expect(page.locator("#tokens")).to_contain_text("revoked")
            assert httpx.post(f"{server.url}/api/collections.list", headers=api, content="{}").status_code == 401

            # Deleting the handbook: the confirmation says what happens; only confirming deletes.
            page.goto(f"{server.url}/team/collections")
            page.click("#collections >> text=Handbook")
            page.click("#delete")
            expect(page.locator("main")).to_contain_text("Every document in it is deleted with it: the 1 you can read")
            fits(page)
            page.click("#confirm-delete button[type=submit]")
            page.wait_for_url(f"{server.url}/team/collections")
            expect(page.locator("main")).to_contain_text('Deleted "Handbook" and the documents in it.')
            context.close()
        finally:
            browser.close()

    board = Collection.objects.get(team=cast.alice.team, name="Board")
    assert board.default_access == "none"
    assert CollectionMembership.objects.filter(collection=board, group__name="Ops", role="read").exists()
    assert ApiToken.objects.get(user=cast.alice, name="laptop").revoked_at is not None
    assert Collection.objects.get(pk=cast.handbook.pk).deleted_at is not None
    assert Document.objects.get(pk=handbook_page.pk).deleted_at is not None
