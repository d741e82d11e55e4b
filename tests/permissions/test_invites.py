"""An invite link lets one person join a team with its role, once, until it expires or is revoked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from permissions.members.services import IssuedInvite, invite_create, invite_revoke
from permissions.models import Invite, TeamRole, User
from tests.conftest import Cast

JOIN = {"username": "dora", "email": "", "password1": "a long enough passphrase", "password2": "a long enough passphrase"}


def invite(cast: Cast, role: str = TeamRole.MEMBER, email: str = "") -> IssuedInvite:
    assert cast.alice.team is not None
    return invite_create(team=cast.alice.team, by=cast.alice, role=role, email=email)


def test_an_invite_page_names_the_team_and_the_role(client: Client, cast: Cast) -> None:
    issued = invite(cast, TeamRole.READ_ONLY, email="dora@acme.example")
    page = client.get(issued.path)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Join Acme" in text and "Read-only" in text and 'value="dora@acme.example"' in text


@pytest.mark.parametrize("role", TeamRole.values)
def test_accepting_an_invite_creates_the_account_in_the_team_with_its_role_and_signs_it_in(
    client: Client, cast: Cast, role: str
) -> None:
    issued = invite(cast, role)
    response = client.post(issued.path, JOIN)
    assert response.status_code == 302 and response["Location"] == "/rag"
    dora = User.objects.get(username="dora")
    assert (dora.team_id, dora.role) == (cast.alice.team_id, role)
    assert not dora.is_staff, "an invite makes a member of the team, not an operator"
    assert client.get("/rag").wsgi_request.user == dora
    issued.invite.refresh_from_db()
    assert issued.invite.accepted_by == dora and issued.invite.status == "accepted"


def test_the_invited_person_signs_in_later_with_the_password_they_chose(client: Client, cast: Cast) -> None:
    client.post(invite(cast).path, JOIN)
    client.post("/logout")
    signed_in = client.post("/login", {"username": "dora", "password": JOIN["password1"]})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/rag"


def test_an_invite_link_works_once(client: Client, cast: Cast) -> None:
    issued = invite(cast)
    client.post(issued.path, JOIN)
    again = Client().post(issued.path, {**JOIN, "username": "eve"})
    assert again.status_code == 410 and "already been used" in again.content.decode()
    assert not User.objects.filter(username="eve").exists()


def test_an_expired_invite_link_is_refused(client: Client, cast: Cast) -> None:
    issued = invite(cast)
    Invite.objects.filter(pk=issued.invite.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for response in (client.get(issued.path), client.post(issued.path, JOIN)):
        assert response.status_code == 410 and "has expired" in response.content.decode()
    assert not User.objects.filter(username="dora").exists()


def test_a_revoked_invite_link_is_refused(client: Client, cast: Cast) -> None:
    issued = invite(cast)
    invite_revoke(invite=issued.invite)
    response = client.post(issued.path, JOIN)
    assert response.status_code == 410 and "was revoked" in response.content.decode()
    assert not User.objects.filter(username="dora").exists()


def test_a_link_no_invite_has_is_not_found(client: Client, cast: Cast) -> None:
    response = client.get("/invite/not-a-real-token")
    assert response.status_code == 404 and "not valid" in response.content.decode()


def test_an_invite_link_works_for_invite_lifetime_days(cast: Cast, settings: Settings) -> None:
    settings.INVITE_LIFETIME_DAYS = 2
    expires_at = invite(cast).invite.expires_at
    assert timedelta(days=2) - timedelta(minutes=1) < expires_at - timezone.now() <= timedelta(days=2)


def test_only_a_digest_of_the_link_is_stored(cast: Cast) -> None:
    issued = invite(cast)
    stored = Invite.objects.values_list(*[f.attname for f in Invite._meta.concrete_fields]).get(pk=issued.invite.pk)
    assert not any(issued.token in str(value) for value in stored)
    assert len(issued.token) >= 43, "256 bits of secret"


def test_accepting_refuses_a_taken_username_and_a_weak_password_and_keeps_the_invite(client: Client, cast: Cast) -> None:
    issued = invite(cast)
    taken = client.post(issued.path, {**JOIN, "username": "BOB"})
    weak = client.post(issued.path, {**JOIN, "password1": "dora", "password2": "dora"})
    assert taken.status_code == 400 and "That username is taken." in taken.content.decode()
    assert weak.status_code == 400 and "too short" in weak.content.decode()
    issued.invite.refresh_from_db()
    assert issued.invite.status == "pending"
