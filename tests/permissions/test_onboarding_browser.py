"""A team adopts Cairn in a browser: an empty install's setup page, the owner's invite, the invited person's first sign-in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE_WIDTH = 390
PASSWORD = "correct horse battery"


@pytest.fixture
def server(tmp_path: Path):
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    yield server
    server.stop()


def test_an_empty_install_is_set_up_and_its_owner_invites_a_member_who_signs_in(server: GunicornServer, db: None) -> None:
    from playwright.sync_api import Page, expect, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")

    def fits_a_phone(page: Page) -> None:
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH, f"{page.url} scrolls sideways"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            owner = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}).new_page()
            owner.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
            owner.goto(f"{server.url}/rag")
            owner.wait_for_url(f"{server.url}/setup")
            fits_a_phone(owner)
            owner.fill("#id_team_name", "Acme")
            owner.fill("#id_username", "olivia")
            owner.fill("#id_password1", PASSWORD)
            owner.fill("#id_password2", PASSWORD)
            owner.click("button[type=submit]")
            owner.wait_for_url(f"{server.url}/rag")
            expect(owner.locator("#getting-started")).to_contain_text("Your team has no documents yet")

            owner.click("header.top >> text=Team")
            owner.wait_for_url(f"{server.url}/team/members")
            owner.select_option("#id_role", "read_only")
            owner.click("text=Create invite link")
            link = owner.input_value("#invite-link")
            assert link.startswith(f"{server.url}/invite/")
            owner.click("#copy-link")
            expect(owner.locator("#copy-link")).to_have_text("Copied")
            assert owner.evaluate("navigator.clipboard.readText()") == link
            fits_a_phone(owner)

            member = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}).new_page()
            member.goto(link)
            expect(member.locator("h1")).to_have_text("Join Acme")
            fits_a_phone(member)
            member.fill("#id_username", "dora")
            member.fill("#id_password1", PASSWORD)
            member.fill("#id_password2", PASSWORD)
            member.click("button[type=submit]")
            member.wait_for_url(f"{server.url}/rag")
            expect(member.locator("header.top .who")).to_have_text("dora")
            expect(member.locator("header.top >> text=Team")).to_have_count(0)
            expect(member.locator("#getting-started")).to_contain_text("nothing you can read")

            owner.goto(f"{server.url}/team/members")
            expect(owner.locator('[data-username="dora"]')).to_contain_text("Read-only")
            expect(owner.locator("#pending-invites")).to_have_count(0)
        finally:
            browser.close()
