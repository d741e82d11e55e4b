"""A real OpenID Connect provider on loopback (oidc-provider-mock): discovery, the code flow, RS256-signed
ID tokens, userinfo. Any client id and secret are accepted; people are put in with their claims."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import werkzeug.serving
from pytest_django import Settings

CLIENT_ID = "cairn"
CLIENT_SECRET = "cairn-secret"


@dataclass(frozen=True)
class Provider:
    url: str

    def add_person(self, sub: str, **claims: Any) -> None:
        """What the provider will say about `sub` when they sign in."""
        response = httpx.put(f"{self.url}/users/{quote(sub, safe='')}", json=claims)
        assert response.status_code == 204, response.text

    def authorize(self, authorization_url: str, sub: str) -> str:
        """Sign `sub` in at the provider's form, as the person would; where the provider sends the browser back."""
        response = httpx.post(authorization_url, data={"sub": sub})
        assert response.status_code == 302, response.text
        return response.headers["location"]


@pytest.fixture
def oidc_provider() -> Iterator[Provider]:
    with warnings.catch_warnings():  # Authlib shows its deprecations always, at import, whatever pytest filters
        warnings.simplefilter("ignore", DeprecationWarning)
        import oidc_provider_mock

    server = werkzeug.serving.make_server("127.0.0.1", 0, oidc_provider_mock.app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Provider(url=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()


def oidc_env(provider: Provider, **more: str) -> dict[str, str]:
    """The environment of a Cairn signing in through `provider`."""
    return {
        "CAIRN_OIDC_ISSUER": provider.url,
        "CAIRN_OIDC_CLIENT_ID": CLIENT_ID,
        "CAIRN_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "CAIRN_OIDC_PROVIDER_NAME": "Mock ID",
        **more,
    }


@pytest.fixture
def sso(settings: Settings, oidc_provider: Provider) -> Provider:
    """Cairn configured for the provider: team from the `team` claim, groups from `groups`."""
    settings.OIDC_ISSUER = oidc_provider.url
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Mock ID"
    settings.OIDC_TEAM_CLAIM = "team"
    settings.OIDC_DEFAULT_TEAM = ""
    settings.OIDC_CREATE_TEAMS = False
    settings.OIDC_GROUPS_CLAIM = "groups"
    return oidc_provider
