"""Password reset by email: the link works once, and the page never tells whether an address has an account."""

from __future__ import annotations

import re

from django.core import mail
from django.test import Client
from pytest_django import Settings

from tests.conftest import Cast

NEW_PASSWORD = "granite-lantern-47"


def reset_link(message: mail.EmailMessage) -> str:
    match = re.search(r"http://testserver(/password-reset/[^/\s]+/[^/\s]+)", str(message.body))
    assert match, message.body
    return match.group(1)


def test_a_forgotten_password_is_reset_through_the_emailed_link(client: Client, cast: Cast) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    assert '<a href="/password-reset">Forgot password?</a>' in client.get("/login").content.decode()
    assert client.get("/password-reset").status_code == 200

    asked = client.post("/password-reset", {"email": "Bob@acme.test"})

    assert asked.status_code == 302 and asked["Location"] == "/password-reset/sent"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["bob@acme.test"]
    assert mail.outbox[0].subject == "Reset your Cairn password"
    opened = client.get(reset_link(mail.outbox[0]))
    assert opened.status_code == 302 and opened["Location"].endswith("/set-password")
    form = client.get(opened["Location"])
    assert form.status_code == 200 and b'name="new_password1"' in form.content
    done = client.post(opened["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/password-reset/done"

    assert client.post("/login", {"username": "bob", "password": "password"}).status_code == 200, "the old password still works"
    assert client.post("/login", {"username": "bob", "password": NEW_PASSWORD}).status_code == 302


def test_a_reset_link_works_once(client: Client, cast: Cast) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    client.post("/password-reset", {"email": "bob@acme.test"})
    link = reset_link(mail.outbox[0])
    set_password = client.get(link)["Location"]
    client.post(set_password, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    again = Client().get(link, follow=True)
    assert again.status_code == 200 and "This link does not work" in again.content.decode()


def test_a_weak_new_password_is_refused(client: Client, cast: Cast) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    client.post("/password-reset", {"email": "bob@acme.test"})
    set_password = client.get(reset_link(mail.outbox[0]))["Location"]
    refused = client.post(set_password, {"new_password1": "12345678", "new_password2": "12345678"})
    assert refused.status_code == 200 and "This password is too common." in refused.content.decode()


def test_the_answer_is_the_same_whether_an_account_has_the_address(client: Client, cast: Cast) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    known = client.post("/password-reset", {"email": "bob@acme.test"}, follow=True)
    unknown = client.post("/password-reset", {"email": "nobody@acme.test"}, follow=True)
    assert known.redirect_chain == unknown.redirect_chain == [("/password-reset/sent", 302)]
    assert known.content.replace(known.wsgi_request.csp_nonce.encode(), b"") == unknown.content.replace(  # type: ignore[attr-defined]
        unknown.wsgi_request.csp_nonce.encode(),  # type: ignore[attr-defined]
        b"",
    )
    assert [message.to for message in mail.outbox] == [["bob@acme.test"]]


def test_accounts_without_a_password_here_get_no_email(client: Client, cast: Cast) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.set_unusable_password()  # as single sign-on makes them
    cast.bob.save()
    assert client.post("/password-reset", {"email": "bob@acme.test"}).status_code == 302
    assert mail.outbox == []


def test_reset_requests_are_throttled_alike_for_known_and_unknown_addresses(
    client: Client, cast: Cast, settings: Settings
) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    for _ in range(settings.PASSWORD_RESET_MAX_REQUESTS):
        assert client.post("/password-reset", {"email": "bob@acme.test"}).status_code == 302
    for email in ("bob@acme.test", "nobody@acme.test"):
        refused = client.post("/password-reset", {"email": email})
        assert refused.status_code == 429 and refused["Retry-After"] == "3600"
        assert "Too many reset requests" in refused.content.decode()
    assert len(mail.outbox) == settings.PASSWORD_RESET_MAX_REQUESTS


def test_one_inbox_is_not_flooded_from_many_addresses(client: Client, cast: Cast, settings: Settings) -> None:
    cast.bob.email = "bob@acme.test"
    cast.bob.save()
    for n in range(settings.PASSWORD_RESET_MAX_REQUESTS):
        client.post("/password-reset", {"email": "bob@acme.test"}, REMOTE_ADDR=f"198.51.100.{n}")
    assert client.post("/password-reset", {"email": "bob@acme.test"}, REMOTE_ADDR="198.51.100.99").status_code == 429
    assert client.post("/password-reset", {"email": "alice@acme.test"}, REMOTE_ADDR="198.51.100.99").status_code == 302
