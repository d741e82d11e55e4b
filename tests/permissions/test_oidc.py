"""Single sign-on through a real OpenID Connect provider on loopback: who signs in, to which team and groups, who is refused."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.test import Client
from pytest_django import Settings

from permissions.models import ExternalIdentity, GroupMembership, Team, User
from permissions.oidc import OidcBackend
from tests.conftest import Cast
from tests.factories import GroupFactory, GroupMembershipFactory, TeamFactory
from tests.permissions.conftest import CLIENT_ID, Provider

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse


def sign_in_through(client: Client, provider: Provider, sub: str, next_url: str = "/rag") -> _MonkeyPatchedWSGIResponse:
    """Start at Cairn's button, sign in at the provider, come back with the code: Cairn's answer to that."""
    start = client.get("/login/sso", {"next": next_url})
    assert start.status_code == 302, start.content
    assert start["Location"].startswith(f"{provider.url}/oauth2/authorize?")
    back = urlsplit(provider.authorize(start["Location"], sub))
    assert back.path == "/login/sso/callback"
    return client.get(f"{back.path}?{back.query}")


def signed_in_user(client: Client) -> User | None:
    response = client.get("/rag")
    return response.wsgi_request.user if response.status_code == 200 else None  # type: ignore[return-value]


def test_a_first_sign_in_creates_the_user_in_the_claimed_team_and_groups(client: Client, cast: Cast, sso: Provider) -> None:
    acme = cast.alice.team
    editors, readers = GroupFactory(team=acme, name="Editors"), GroupFactory(team=acme, name="Readers")
    sso.add_person(
        "dana-1", email="dana@acme.test", email_verified=True, preferred_username="dana", team="Acme", groups=["Editors", "Board"]
    )

    response = sign_in_through(client, sso, "dana-1", next_url="/graph")

    assert response.status_code == 302 and response["Location"] == "/graph"
    dana = User.objects.get(external_identities__issuer=sso.url, external_identities__subject="dana-1")
    assert (dana.username, dana.email, dana.team) == ("dana", "dana@acme.test", acme)
    assert not dana.has_usable_password()
    assert set(dana.member_groups.all()) == {editors}, "a group Cairn does not have (Board) is ignored"
    assert readers not in dana.member_groups.all()
    assert signed_in_user(client) == dana


def test_each_sign_in_finds_the_same_user_and_syncs_their_groups(client: Client, cast: Cast, sso: Provider) -> None:
    acme = cast.alice.team
    editors, readers = GroupFactory.create(team=acme, name="Editors"), GroupFactory.create(team=acme, name="Readers")
    sso.add_person("dana-1", email="dana@acme.test", email_verified=True, team="Acme", groups=["Editors"])
    sign_in_through(client, sso, "dana-1")
    client.post("/logout")
    dana = User.objects.get(external_identities__subject="dana-1")
    elsewhere = GroupFactory.create(team=cast.charlie.team, name="Editors")
    GroupMembershipFactory(group=elsewhere, user=dana)  # another team's group: not the provider's to take away

    sso.add_person("dana-1", email="dana.new@acme.test", email_verified=True, team="Acme", groups=["Readers"])
    assert sign_in_through(client, sso, "dana-1").status_code == 302

    assert User.objects.filter(external_identities__subject="dana-1").get() == dana
    assert set(GroupMembership.objects.filter(user=dana).values_list("group", flat=True)) == {readers.pk, elsewhere.pk}
    assert editors not in dana.member_groups.all()


def test_without_a_groups_claim_setting_groups_are_left_as_they_are(
    client: Client, cast: Cast, sso: Provider, settings: Settings
) -> None:
    settings.OIDC_GROUPS_CLAIM = ""
    editors = GroupFactory(team=cast.alice.team, name="Editors")
    sso.add_person("dana-1", team="Acme", groups=[])
    sign_in_through(client, sso, "dana-1")
    dana = User.objects.get(external_identities__subject="dana-1")
    GroupMembershipFactory(group=editors, user=dana)
    client.post("/logout")
    sign_in_through(client, sso, "dana-1")
    assert set(dana.member_groups.all()) == {editors}


def test_a_single_team_install_puts_everyone_in_the_default_team(
    client: Client, cast: Cast, sso: Provider, settings: Settings
) -> None:
    settings.OIDC_TEAM_CLAIM = ""
    settings.OIDC_DEFAULT_TEAM = "Acme"
    sso.add_person("erin-1", email="erin@acme.test", email_verified=True)
    assert sign_in_through(client, sso, "erin-1").status_code == 302
    assert User.objects.get(external_identities__subject="erin-1").team == cast.alice.team


def test_someone_the_provider_names_no_team_for_is_refused_with_a_page(client: Client, cast: Cast, sso: Provider) -> None:
    sso.add_person("erin-1", email="erin@acme.test", email_verified=True)
    response = sign_in_through(client, sso, "erin-1")
    assert response.status_code == 403
    assert "did not say which team you belong to (no “team” claim)" in response.content.decode()
    assert not ExternalIdentity.objects.exists() and not User.objects.filter(email="erin@acme.test").exists()
    assert signed_in_user(client) is None


def test_an_unknown_team_is_refused_unless_teams_may_be_created(
    client: Client, cast: Cast, sso: Provider, settings: Settings
) -> None:
    sso.add_person("erin-1", team="Globex")
    refused = sign_in_through(client, sso, "erin-1")
    assert refused.status_code == 403 and "Cairn has no team called Globex" in refused.content.decode()
    assert not Team.objects.filter(name="Globex").exists()

    settings.OIDC_CREATE_TEAMS = True
    assert sign_in_through(client, sso, "erin-1").status_code == 302
    assert User.objects.get(external_identities__subject="erin-1").team == Team.objects.get(name="Globex")


def test_a_user_of_another_team_is_not_moved_by_a_claim(client: Client, cast: Cast, sso: Provider) -> None:
    sso.add_person("dana-1", team="Acme")
    sign_in_through(client, sso, "dana-1")
    client.post("/logout")
    sso.add_person("dana-1", team="Other")
    response = sign_in_through(client, sso, "dana-1")
    assert response.status_code == 403 and "belongs to another team than Other" in response.content.decode()
    assert User.objects.get(external_identities__subject="dana-1").team == cast.alice.team


def test_an_unverified_email_does_not_take_over_the_account_that_has_it(client: Client, cast: Cast, sso: Provider) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    sso.add_person("mallory-1", email="BOB@acme.test", email_verified=False, team="Acme")

    response = sign_in_through(client, sso, "mallory-1")

    assert response.status_code == 403
    assert "the provider has not verified that the address is yours" in response.content.decode()
    assert not ExternalIdentity.objects.exists()
    assert signed_in_user(client) is None


def test_a_verified_email_links_the_account_that_has_it(client: Client, cast: Cast, sso: Provider) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    sso.add_person("bob-1", email="Bob@acme.test", email_verified=True, team="Acme")
    assert sign_in_through(client, sso, "bob-1").status_code == 302
    assert ExternalIdentity.objects.get(subject="bob-1").user == cast.bob
    assert signed_in_user(client) == cast.bob


def test_an_operators_account_is_never_linked_by_email(client: Client, cast: Cast, sso: Provider) -> None:
    cast.alice.email, cast.alice.is_staff = "alice@acme.test", True
    cast.alice.save()
    sso.add_person("alice-1", email="alice@acme.test", email_verified=True, team="Acme")
    response = sign_in_through(client, sso, "alice-1")
    assert response.status_code == 403 and "not linked by email address" in response.content.decode()
    assert not ExternalIdentity.objects.exists()


def test_a_disabled_account_is_refused(client: Client, cast: Cast, sso: Provider) -> None:
    sso.add_person("dana-1", team="Acme")
    sign_in_through(client, sso, "dana-1")
    client.post("/logout")
    User.objects.filter(external_identities__subject="dana-1").update(is_active=False)
    response = sign_in_through(client, sso, "dana-1")
    assert response.status_code == 403 and "disabled" in response.content.decode()
    assert signed_in_user(client) is None


def test_a_name_taken_by_another_user_is_not_theirs(client: Client, cast: Cast, sso: Provider) -> None:
    sso.add_person("imposter-1", preferred_username="alice", team="Acme")
    sign_in_through(client, sso, "imposter-1")
    assert User.objects.get(external_identities__subject="imposter-1").username == "alice-2"
    assert not cast.alice.external_identities.exists()


def test_the_login_page_offers_the_provider_only_when_configured(client: Client, cast: Cast, settings: Settings) -> None:
    assert "Sign in with" not in client.get("/login").content.decode()
    assert client.get("/login/sso").status_code == 404
    assert client.get("/login/sso/callback?code=x&state=y").status_code == 404
    settings.OIDC_ENABLED, settings.OIDC_PROVIDER_NAME = True, "Keycloak"
    page = client.get("/login?next=/graph").content.decode()
    assert '<a class="button sso" href="/login/sso?next=/graph">Sign in with Keycloak</a>' in page


def test_an_unreachable_provider_gives_a_page_not_an_error(client: Client, sso: Provider, settings: Settings, cast: Cast) -> None:
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # discard: nothing listens
    response = client.get("/login/sso")
    assert response.status_code == 502 and "could not be reached" in response.content.decode()


def test_the_provider_saying_no_ends_on_a_page(client: Client, sso: Provider, cast: Cast) -> None:
    start = client.get("/login/sso")
    state = dict(part.split("=", 1) for part in urlsplit(start["Location"]).query.split("&"))["state"]
    response = client.get(f"/login/sso/callback?error=access_denied&state={state}")
    assert response.status_code == 403 and "The provider did not sign you in." in response.content.decode()


def test_a_callback_this_browser_did_not_start_is_refused(client: Client, sso: Provider, cast: Cast) -> None:
    client.get("/login/sso")  # this browser's state is another
    response = client.get("/login/sso/callback?code=stolen&state=forged")
    assert response.status_code == 400 and "could not be verified" in response.content.decode()


def test_a_password_sign_in_is_still_locked_out_with_single_sign_on_on(
    client: Client, cast: Cast, sso: Provider, settings: Settings
) -> None:
    cast.bob.save(update_fields=["password"])
    for _ in range(settings.LOGIN_MAX_FAILURES):
        assert client.post("/login?code=x&state=y", {"username": "bob", "password": "wrong"}).status_code == 200
    assert client.post("/login", {"username": "bob", "password": "password"}).status_code == 429


@pytest.mark.parametrize(
    ("changes", "accepted"),
    [({}, True), ({"aud": "another-client"}, False), ({"iss": "http://127.0.0.1:1"}, False), ({"exp": 1}, False)],
)
def test_an_id_token_is_accepted_only_for_this_client_from_this_issuer(sso: Provider, changes: dict, accepted: bool) -> None:
    cache.clear()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": sso.url, "aud": CLIENT_ID, "sub": "dana-1", "exp": int(time.time()) + 60, **changes}
    token = jwt.encode(claims, key, algorithm="RS256")
    backend = OidcBackend()
    if accepted:
        assert backend.get_payload_data(token, key.public_key())["sub"] == "dana-1"
    else:
        with pytest.raises(SuspiciousOperation):
            backend.get_payload_data(token, key.public_key())


def test_a_second_team_of_the_same_name_makes_the_claim_ambiguous(client: Client, cast: Cast, sso: Provider) -> None:
    TeamFactory(name="Acme")
    sso.add_person("dana-1", team="Acme")
    response = sign_in_through(client, sso, "dana-1")
    assert response.status_code == 403 and "Several Cairn teams are called Acme" in response.content.decode()


def test_a_deactivated_user_signed_in_by_the_provider_is_signed_out(client: Client, cast: Cast, sso: Provider) -> None:
    sso.add_person("dana-1", team="Acme")
    sign_in_through(client, sso, "dana-1")
    User.objects.filter(external_identities__subject="dana-1").update(is_active=False)
    assert signed_in_user(client) is None
