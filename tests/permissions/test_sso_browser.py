"""Single sign-on end to end: Chromium, Cairn under gunicorn, and a real OpenID Connect provider on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from permissions.models import ExternalIdentity, User
from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import Cast
from tests.factories import GroupFactory
from tests.permissions.conftest import Provider, oidc_env
from tests.servers import GunicornServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(tmp_path: Path, oidc_provider: Provider) -> Iterator[GunicornServer]:
    env = oidc_env(oidc_provider, CAIRN_OIDC_TEAM_CLAIM="team", CAIRN_OIDC_GROUPS_CLAIM="groups")
    server = GunicornServer(log_path=tmp_path / "gunicorn.log", extra_env=env).start()
    yield server
    server.stop()


def test_a_person_signs_in_with_the_provider_and_lands_in_their_team_and_groups(
    cast: Cast, oidc_provider: Provider, server: GunicornServer, tmp_path: Path
) -> None:
    from playwright.sync_api import Route, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    editors = GroupFactory(team=cast.alice.team, name="Editors")
    GroupFactory(team=cast.alice.team, name="Readers")
    oidc_provider.add_person(
        "dana-1", email="dana@acme.test", email_verified=True, preferred_username="dana", team="Acme", groups=["Editors"]
    )

    def loopback_only(route: Route) -> None:
        # The provider's form asks a CDN for its stylesheet: nothing leaves this machine.
        (route.continue_ if urlsplit(route.request.url).hostname == "127.0.0.1" else route.abort)()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            page.route("**/*", loopback_only)
            page.goto(f"{server.url}/login?next=/graph")
            page.get_by_role("link", name="Sign in with Mock ID").click()
            page.wait_for_url(f"{oidc_provider.url}/oauth2/authorize?*")
            page.get_by_placeholder("sub").fill("dana-1")
            page.get_by_role("button", name="Authorize").click()
            page.wait_for_url(f"{server.url}/graph")
            page.screenshot(path=str(tmp_path / "signed-in.png"))
            assert page.locator("header.top .who").inner_text() == "dana"
        finally:
            browser.close()

    dana = User.objects.get(username="dana")
    assert (dana.team, dana.email) == (cast.alice.team, "dana@acme.test")
    assert list(dana.member_groups.all()) == [editors]
    assert ExternalIdentity.objects.filter(user=dana, issuer=oidc_provider.url, subject="dana-1").exists()
