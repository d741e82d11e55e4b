"""/team/members: team admins see their people, invite by link, revoke, change roles and deactivate; nobody else."""

from __future__ import annotations

import re

from django.test import Client

from permissions.members.services import invite_create
from permissions.models import Invite, TeamRole, User
from tests.conftest import Cast, SignIn

MEMBERS = "/team/members"


def test_a_team_admin_sees_their_teams_people_with_role_and_last_sign_in(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    client.post("/logout")
    client.post("/login", {"username": "alice", "password": "password"})
    page = client.get(MEMBERS)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-username="alice"' in text and 'data-username="bob"' in text and "charlie" not in text
    assert "last signed in" in text and "never signed in" in text  # alice just did; bob never has


def test_the_header_links_to_the_team_page_for_admins_only(signed_in: SignIn, cast: Cast) -> None:
    assert 'href="/team/members">Team</a>' in signed_in(cast.alice).get("/rag").content.decode()
    assert 'href="/team/members"' not in signed_in(cast.bob).get("/rag").content.decode()


def test_a_member_gets_the_styled_forbidden_page(signed_in: SignIn, cast: Cast) -> None:
    page = signed_in(cast.bob).get(MEMBERS)
    assert page.status_code == 403 and "<h1>" in page.content.decode() and "alice" not in page.content.decode().split("<main>")[1]


def test_signed_out_the_page_asks_to_sign_in(client: Client, cast: Cast) -> None:
    response = client.get(MEMBERS)
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_an_invite_link_is_shown_once_and_works(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    created = client.post(f"{MEMBERS}/invite", {"email": "dora@acme.example", "role": TeamRole.READ_ONLY})
    assert created.status_code == 200
    link = re.search(r'id="invite-link" value="http://testserver(/invite/[^"]+)"', created.content.decode())
    assert link is not None
    offered = re.search(r'<option value="(\w+)" selected>', created.content.decode())
    assert offered is not None and offered.group(1) == TeamRole.READ_ONLY, "the next invite keeps the role just used"
    assert "/invite/" not in client.get(MEMBERS).content.decode(), "the link is not shown again"
    assert "dora@acme.example" in client.get(MEMBERS).content.decode(), "the invite is listed as pending"
    joined = Client().post(
        link.group(1), {"username": "dora", "password1": "a long passphrase", "password2": "a long passphrase"}
    )
    assert joined.status_code == 302 and User.objects.get(username="dora").role == TeamRole.READ_ONLY


def test_an_invite_with_a_bad_email_is_refused_with_the_reason(signed_in: SignIn, cast: Cast) -> None:
    response = signed_in(cast.alice).post(f"{MEMBERS}/invite", {"email": "not an email", "role": TeamRole.MEMBER})
    assert response.status_code == 400 and "valid email" in response.content.decode()
    assert not Invite.objects.exists()


def test_a_team_admin_revokes_a_pending_invite(signed_in: SignIn, cast: Cast) -> None:
    assert cast.alice.team is not None
    issued = invite_create(team=cast.alice.team, by=cast.alice, email="dora@acme.example")
    client = signed_in(cast.alice)
    response = client.post(f"{MEMBERS}/invites/{issued.invite.pk}/revoke", follow=True)
    assert "Invite revoked" in response.content.decode() and "dora@acme.example" not in response.content.decode()
    assert Client().get(issued.path).status_code == 410


def test_a_team_admin_changes_a_role_and_deactivates_and_reactivates(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    changed = client.post(f"{MEMBERS}/{cast.bob.pk}/role", {"role": TeamRole.READ_ONLY}, follow=True)
    assert "bob is now read-only." in changed.content.decode()
    client.post(f"{MEMBERS}/{cast.bob.pk}/deactivate")
    assert User.objects.get(pk=cast.bob.pk).is_active is False
    assert "Deactivated" in client.get(MEMBERS).content.decode()
    client.post(f"{MEMBERS}/{cast.bob.pk}/activate")
    bob = User.objects.get(pk=cast.bob.pk)
    assert (bob.role, bob.is_active) == (TeamRole.READ_ONLY, True)


def test_an_admin_is_offered_no_change_to_themselves_and_is_refused_one(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    assert f"/team/members/{cast.alice.pk}/" not in client.get(MEMBERS).content.decode()
    refused = client.post(f"{MEMBERS}/{cast.alice.pk}/deactivate", follow=True)
    assert "You cannot deactivate yourself" in refused.content.decode()
    assert User.objects.get(pk=cast.alice.pk).is_active


def test_another_teams_people_and_invites_are_not_found(signed_in: SignIn, cast: Cast) -> None:
    assert cast.charlie.team is not None
    theirs = invite_create(team=cast.charlie.team, by=cast.charlie).invite
    client = signed_in(cast.alice)
    assert client.post(f"{MEMBERS}/{cast.charlie.pk}/deactivate").status_code == 404
    assert client.post(f"{MEMBERS}/{cast.charlie.pk}/role", {"role": TeamRole.MEMBER}).status_code == 404
    assert client.post(f"{MEMBERS}/invites/{theirs.pk}/revoke").status_code == 404
    charlie = User.objects.get(pk=cast.charlie.pk)
    assert (charlie.role, charlie.is_active) == (TeamRole.ADMIN, True)
