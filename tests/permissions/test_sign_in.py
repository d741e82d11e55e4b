"""Session sign-in and sign-out for the pages."""

from __future__ import annotations

from django.test import Client
from pytest_django import Settings

from tests.conftest import Cast, SignIn


def test_signing_in_lands_on_the_rag_page(client: Client, cast: Cast) -> None:
    cast.bob.save(update_fields=["password"])
    page = client.get("/login")
    assert page.status_code == 200 and b'name="password"' in page.content
    wrong = client.post("/login", {"username": "bob", "password": "wrong"})
    assert wrong.status_code == 200 and b"did not match" in wrong.content
    response = client.post("/login", {"username": "bob", "password": "password", "next": "/rag"})
    assert response.status_code == 302 and response["Location"] == "/rag"
    assert client.get("/rag").status_code == 200


def test_signing_out_needs_a_post(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.bob)
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 302
    assert client.get("/rag").status_code == 302


def test_sign_in_is_refused_for_a_while_after_five_wrong_passwords(client: Client, cast: Cast, settings: Settings) -> None:
    from django.core.cache import cache

    cache.clear()
    cast.bob.save(update_fields=["password"])
    for _ in range(settings.LOGIN_MAX_FAILURES):
        assert client.post("/login", {"username": "bob", "password": "wrong"}).status_code == 200
    refused = client.post("/login", {"username": "bob", "password": "password"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) == settings.LOGIN_LOCKOUT_SECONDS
    assert b"Too many failed sign-ins. Wait 15 minutes and try again." in refused.content
    assert client.get("/rag").status_code == 302, "the right password did not get through while refused"


def test_a_successful_sign_in_clears_that_users_failures(client: Client, cast: Cast, settings: Settings) -> None:
    from django.core.cache import cache

    cache.clear()
    cast.bob.save(update_fields=["password"])
    for _ in range(settings.LOGIN_MAX_FAILURES - 1):
        client.post("/login", {"username": "bob", "password": "wrong"})
    assert client.post("/login", {"username": "bob", "password": "password"}).status_code == 302
    client.post("/logout")
    for _ in range(settings.LOGIN_MAX_FAILURES - 1):
        client.post("/login", {"username": "bob", "password": "wrong"})
    assert client.post("/login", {"username": "bob", "password": "password"}).status_code == 302


def test_the_admin_signs_in_through_the_same_throttled_page(client: Client, db: None) -> None:
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 200 and b'action="/login"' in page.content
