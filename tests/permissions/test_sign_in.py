"""Session sign-in and sign-out for the pages."""

from __future__ import annotations

from typing import Any

from django.test import Client, RequestFactory
from pytest_django import Settings
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle

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


def test_a_signed_in_user_who_is_not_staff_is_refused_the_admin_not_sent_round_a_loop(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.bob)
    response = client.get("/admin/", follow=True)
    assert len(response.redirect_chain) == 1 and response.redirect_chain[0][0].startswith("/admin/login/")
    assert response.status_code == 403 and "<h1>Not allowed</h1>" in response.content.decode()


def test_a_signed_in_operator_goes_on_to_the_admin(signed_in: SignIn, cast: Cast) -> None:
    cast.alice.is_staff = cast.alice.is_superuser = True
    cast.alice.save()
    response = signed_in(cast.alice).get("/admin/login/?next=/admin/")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def wrong_passwords(client: Client, username: str, times: int, **extra: Any) -> None:
    for _ in range(times):
        assert client.post("/login", {"username": username, "password": "wrong"}, **extra).status_code == 200


def test_wrong_passwords_for_other_names_do_not_lock_an_account_out_from_the_same_address(
    client: Client, cast: Cast, settings: Settings
) -> None:
    # Everyone behind one proxy or NAT shares an address: others' failures must not lock bob out.
    cast.bob.save(update_fields=["password"])
    for name in ("carol", "dave", "erin", "frank", "grace"):
        wrong_passwords(client, name, settings.LOGIN_MAX_FAILURES)
    assert client.post("/login", {"username": "bob", "password": "password"}).status_code == 302


def test_behind_a_trusted_proxy_each_client_address_is_locked_out_on_its_own(
    client: Client, cast: Cast, settings: Settings
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    cast.bob.save(update_fields=["password"])
    attacker: dict[str, Any] = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    wrong_passwords(client, "bob", settings.LOGIN_MAX_FAILURES, **attacker)
    assert client.post("/login", {"username": "bob", "password": "password"}, **attacker).status_code == 429
    bob: dict[str, Any] = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "198.51.100.9"}
    assert client.post("/login", {"username": "bob", "password": "password"}, **bob).status_code == 302


def test_the_proxy_counts_from_the_right_so_a_client_cannot_choose_its_address(
    client: Client, cast: Cast, settings: Settings
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    cast.bob.save(update_fields=["password"])
    for n in range(settings.LOGIN_MAX_FAILURES):
        # The client wrote the first address; the trusted proxy appended the one it saw.
        spoofed: dict[str, Any] = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": f"192.0.2.{n}, 203.0.113.7"}
        wrong_passwords(client, "bob", 1, **spoofed)
    refused: dict[str, Any] = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "192.0.2.99, 203.0.113.7"}
    assert client.post("/login", {"username": "bob", "password": "password"}, **refused).status_code == 429


def test_without_a_trusted_proxy_a_forwarded_address_is_ignored(client: Client, cast: Cast, settings: Settings) -> None:
    cast.bob.save(update_fields=["password"])
    for n in range(settings.LOGIN_MAX_FAILURES):
        wrong_passwords(client, "bob", 1, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
    refused = client.post("/login", {"username": "bob", "password": "password"}, HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert refused.status_code == 429


def test_without_a_trusted_proxy_the_api_throttles_ignore_a_forwarded_address(rf: RequestFactory) -> None:
    request = rf.post("/api/documents.list", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert AnonRateThrottle().get_ident(Request(request)) == "10.0.0.2"
