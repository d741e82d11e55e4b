"""The /import page as served: sign-in, the collections offered, a strict CSP."""

from __future__ import annotations

from django.test import Client

from tests.conftest import Cast, SignIn


def test_the_import_page_needs_a_sign_in(client: Client, db: None) -> None:
    assert client.get("/import").status_code == 302


def test_it_offers_the_collections_the_user_may_write_to(cast: Cast, signed_in: SignIn) -> None:
    page = signed_in(cast.alice).get("/import")
    body = page.content.decode()
    assert page.status_code == 200
    assert f'value="{cast.handbook.pk}"' in body and f'value="{cast.private.pk}"' in body
    assert "'nonce-" in page["Content-Security-Policy"] and "unsafe-inline" not in page["Content-Security-Policy"]


def test_bob_who_may_only_read_is_offered_nothing(cast: Cast, signed_in: SignIn) -> None:
    body = signed_in(cast.bob).get("/import").content.decode()
    assert "There is no collection you may add documents to." in body
    assert str(cast.handbook.pk) not in body


def test_charlie_is_offered_only_his_own_teams_collections(cast: Cast, signed_in: SignIn) -> None:
    body = signed_in(cast.charlie).get("/import").content.decode()
    assert str(cast.handbook.pk) not in body and str(cast.private.pk) not in body
