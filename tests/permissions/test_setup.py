"""An empty install opens its setup page, which creates the first team and its owner, once."""

from __future__ import annotations

import pytest
from django.test import Client

from config.errors import NotFound
from permissions.members.services import setup_complete
from permissions.models import Team, TeamRole, User
from tests.conftest import Cast

SETUP = {
    "team_name": "Acme",
    "username": "olivia",
    "email": "olivia@acme.example",
    "password1": "a long enough passphrase",
    "password2": "a long enough passphrase",
}


@pytest.mark.parametrize("page", ["/rag", "/graph", "/import", "/login", "/team/members"])
def test_on_an_empty_install_every_page_leads_to_the_setup_page(client: Client, db: None, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 302 and response["Location"] == "/setup"


def test_on_an_empty_install_the_api_health_and_admin_answer_as_usual(client: Client, db: None) -> None:
    assert client.post("/api/users.list").status_code == 401
    assert client.get("/health").status_code == 200
    assert client.get("/admin/login/").status_code == 200


def test_the_setup_page_asks_for_the_team_and_its_owner(client: Client, db: None) -> None:
    page = client.get("/setup")
    assert page.status_code == 200
    for field in ("team_name", "username", "email", "password1", "password2"):
        assert f'name="{field}"' in page.content.decode()


def test_setup_creates_the_team_and_its_owner_and_signs_them_in(client: Client, db: None) -> None:
    response = client.post("/setup", SETUP)
    assert response.status_code == 302 and response["Location"] == "/rag"
    owner = User.objects.get(username="olivia")
    assert owner.team is not None and owner.team.name == "Acme"
    assert owner.role == TeamRole.ADMIN
    assert owner.is_staff and owner.is_superuser, "the owner operates the install, /admin/ included"
    assert owner.email == "olivia@acme.example" and owner.check_password("a long enough passphrase")
    page = client.get("/rag")
    assert page.status_code == 200 and page.wsgi_request.user == owner


def test_after_setup_the_rag_page_says_what_to_do_first(client: Client, db: None) -> None:
    client.post("/setup", SETUP)
    page = client.get("/rag").content.decode()
    assert "Your team has no documents yet" in page
    assert 'href="/team/collections"' in page and 'href="/import"' in page and 'href="/team/members"' in page


def test_setup_refuses_passwords_that_differ_or_are_weak_and_creates_nothing(client: Client, db: None) -> None:
    differ = client.post("/setup", {**SETUP, "password2": "another passphrase"})
    weak = client.post("/setup", {**SETUP, "password1": "12345678", "password2": "12345678"})
    assert differ.status_code == 400 and "didn’t match" in differ.content.decode()
    assert weak.status_code == 400 and "too common" in weak.content.decode()
    assert not Team.objects.exists() and not User.objects.exists()


def test_the_setup_page_is_not_found_once_a_team_exists(client: Client, cast: Cast) -> None:
    assert client.get("/setup").status_code == 404
    takeover = client.post("/setup", {**SETUP, "username": "mallory"})
    assert takeover.status_code == 404
    assert not User.objects.filter(username="mallory").exists() and Team.objects.count() == 2


def test_setup_is_refused_when_a_team_was_created_meanwhile(db: None) -> None:
    Team.objects.create(name="First")
    with pytest.raises(NotFound):
        setup_complete(team_name="Second", username="mallory", password="a long enough passphrase")
    assert not User.objects.exists()
