"""`create_team` and `invite`: the setup page and the invite link, from a shell."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from permissions.models import Team, TeamRole, User
from tests.conftest import Cast
from tests.factories import TeamFactory, UserFactory


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_team_makes_the_team_and_a_new_owner_and_says_what_to_do(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a long enough passphrase")
    out, _ = run("create_team", "Acme", "--owner", "olivia", "--noinput", "--url", "https://kb.acme.example")
    owner = User.objects.get(username="olivia")
    assert owner.team is not None and owner.team.name == "Acme"
    assert (owner.role, owner.is_staff, owner.is_superuser) == (TeamRole.ADMIN, True, True)
    assert owner.check_password("a long enough passphrase")
    assert "https://kb.acme.example/login" in out and "manage.py invite" in out and "/team/collections" in out


def test_create_team_gives_an_operator_without_a_team_their_team(db: None) -> None:
    operator = UserFactory.create(team=None, username="root", is_staff=True, is_superuser=True)
    operator.save(update_fields=["password"])  # as createsuperuser leaves it
    run("create_team", "Acme", "--owner", "root")
    operator.refresh_from_db()
    assert operator.team is not None and operator.team.name == "Acme" and operator.role == TeamRole.ADMIN


def test_create_team_refuses_an_owner_who_has_a_team(cast: Cast) -> None:
    with pytest.raises(CommandError, match="already belongs"):
        run("create_team", "Another", "--owner", "bob")
    assert not Team.objects.filter(name="Another").exists()


def test_create_team_refuses_a_weak_password(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "12345678")
    with pytest.raises(CommandError, match="too common"):
        run("create_team", "Acme", "--owner", "olivia", "--noinput")
    assert not Team.objects.exists()


def test_invite_prints_a_link_that_lets_one_person_join_with_the_role(cast: Cast, client: Client) -> None:
    out, err = run("invite", "--team", "Acme", "--role", "read_only", "--email", "dora@acme.example")
    link = out.strip()
    assert link.startswith("http://127.0.0.1:8000/invite/") and "works once" in err
    path = link.removeprefix("http://127.0.0.1:8000")
    client.post(path, {"username": "dora", "password1": "a long passphrase", "password2": "a long passphrase"})
    dora = User.objects.get(username="dora")
    assert (dora.team_id, dora.role) == (cast.alice.team_id, TeamRole.READ_ONLY)


def test_invite_needs_the_team_named_when_there_are_several(cast: Cast) -> None:
    with pytest.raises(CommandError, match="--team"):
        run("invite")
    with pytest.raises(CommandError, match="No team named"):
        run("invite", "--team", "Nobody")


def test_invite_picks_the_only_team(db: None) -> None:
    TeamFactory(name="Solo")
    out, _ = run("invite")
    assert "/invite/" in out
