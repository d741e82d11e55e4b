"""users.* and invites.*: your own team only; admins change roles, deactivate people and invite; never yourself."""

from __future__ import annotations

import pytest
from django.test import Client

from config.errors import Forbidden
from permissions.members.services import invite_create, member_role_set
from permissions.models import Invite, TeamRole, TokenScope, User
from tests.conftest import ApiFor, Cast
from tests.factories import UserFactory


def test_users_list_shows_your_own_team_only(cast: Cast, api_for: ApiFor) -> None:
    body = api_for(cast.bob).post("users.list").json()
    assert [u["username"] for u in body["data"]] == ["alice", "bob"] and body["pagination"]["total"] == 2
    alice = body["data"][0]
    assert (alice["role"], alice["isActive"], alice["lastSignInAt"]) == ("admin", True, None)
    assert set(alice) == {"id", "username", "email", "role", "isActive", "lastSignInAt", "createdAt"}


def test_an_account_without_a_team_lists_nobody(cast: Cast, api_for: ApiFor) -> None:
    operator = UserFactory.create(team=None, username="operator")
    assert api_for(operator).post("users.list").json()["data"] == []


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [
        ("users.info", {}),
        ("users.update", {"role": "read_only"}),
        ("users.deactivate", {}),
        ("users.activate", {}),
    ],
)
def test_another_teams_user_is_not_found(cast: Cast, api_for: ApiFor, endpoint: str, body: dict) -> None:
    response = api_for(cast.alice).post(endpoint, {"id": str(cast.charlie.pk), **body})
    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    charlie = User.objects.get(pk=cast.charlie.pk)
    assert (charlie.role, charlie.is_active) == (TeamRole.ADMIN, True)


def test_another_teams_invite_is_not_found_nor_listed(cast: Cast, api_for: ApiFor) -> None:
    assert cast.charlie.team is not None
    theirs = invite_create(team=cast.charlie.team, by=cast.charlie, email="spy@other.example").invite
    response = api_for(cast.alice).post("invites.revoke", {"id": str(theirs.pk)})
    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    assert api_for(cast.alice).post("invites.list").json()["data"] == []
    theirs.refresh_from_db()
    assert theirs.status == "pending"


def test_a_team_admin_changes_a_members_role(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).post("users.update", {"id": str(cast.bob.pk), "role": "read_only"})
    assert response.status_code == 200 and response.json()["data"]["role"] == "read_only"
    refused = api_for(cast.bob).post("collections.list"), api_for(cast.bob).post("apiKeys.create", {})
    assert refused[0].status_code == 200 and refused[1].status_code == 403


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [
        ("users.update", {"role": "admin"}),
        ("users.deactivate", {}),
        ("users.activate", {}),
        ("invites.create", None),
        ("invites.list", None),
        ("invites.revoke", {}),
    ],
)
def test_a_member_who_is_not_an_admin_is_refused(cast: Cast, api_for: ApiFor, endpoint: str, body: dict | None) -> None:
    payload = {} if body is None else {"id": str(cast.alice.pk), **body}
    response = api_for(cast.bob).post(endpoint, payload)
    assert (response.status_code, response.json()["error"]) == (403, "forbidden")


@pytest.mark.parametrize(("endpoint", "body"), [("users.update", {"role": "member"}), ("users.deactivate", {})])
def test_an_admin_cannot_change_or_deactivate_themselves(cast: Cast, api_for: ApiFor, endpoint: str, body: dict) -> None:
    response = api_for(cast.alice).post(endpoint, {"id": str(cast.alice.pk), **body})
    assert response.status_code == 403 and "another team admin" in response.json()["message"]
    assert User.objects.get(pk=cast.alice.pk).role == TeamRole.ADMIN


def test_the_last_admin_is_never_demoted_even_by_an_admin_demoted_meanwhile(cast: Cast) -> None:
    # Two admins demoting each other at once: the second, acting on what it read before, is refused.
    dora = UserFactory.create(team=cast.alice.team, username="dora", role=TeamRole.ADMIN)
    alice_as_read_before = User.objects.get(pk=cast.alice.pk)
    member_role_set(member=cast.alice, role=TeamRole.MEMBER, by=dora)
    with pytest.raises(Forbidden, match="last admin"):
        member_role_set(member=dora, role=TeamRole.MEMBER, by=alice_as_read_before)
    assert User.objects.get(pk=dora.pk).role == TeamRole.ADMIN


def test_a_deactivated_member_can_neither_sign_in_nor_use_a_token_until_reactivated(
    cast: Cast, api_for: ApiFor, client: Client
) -> None:
    cast.bob.save(update_fields=["password"])
    bobs = api_for(cast.bob)
    client.force_login(cast.bob)
    deactivated = api_for(cast.alice).post("users.deactivate", {"id": str(cast.bob.pk)})
    assert deactivated.status_code == 200 and deactivated.json()["data"]["isActive"] is False
    assert bobs.post("documents.list").status_code == 401
    assert client.get("/rag").status_code == 302, "the open session ends"
    assert Client().post("/login", {"username": "bob", "password": "password"}).status_code == 200
    assert api_for(cast.alice).post("users.activate", {"id": str(cast.bob.pk)}).json()["data"]["isActive"] is True
    assert bobs.post("documents.list").status_code == 200


def test_invites_create_gives_the_link_once_and_list_and_revoke_follow_it(cast: Cast, api_for: ApiFor, client: Client) -> None:
    api = api_for(cast.alice)
    created = api.post("invites.create", {"email": "dora@acme.example", "role": "read_only"}).json()["data"]
    assert created["url"].startswith("http://testserver/invite/") and created["status"] == "pending"
    assert (created["role"], created["email"], created["createdBy"]) == ("read_only", "dora@acme.example", str(cast.alice.pk))
    listed = api.post("invites.list", {"status": "pending"}).json()["data"]
    assert [i["id"] for i in listed] == [created["id"]] and "url" not in listed[0]
    assert client.get(created["url"].removeprefix("http://testserver")).status_code == 200
    revoked = api.post("invites.revoke", {"id": created["id"]}).json()["data"]
    assert revoked["status"] == "revoked" and revoked["revokedAt"]
    assert client.get(created["url"].removeprefix("http://testserver")).status_code == 410
    assert api.post("invites.list", {"status": "pending"}).json()["data"] == []


def test_invite_links_begin_with_site_url_when_it_is_set(cast: Cast, api_for: ApiFor, settings) -> None:
    settings.SITE_URL = "https://cairn.acme.example"
    created = api_for(cast.alice).post("invites.create").json()["data"]
    assert created["url"].startswith("https://cairn.acme.example/invite/")


def test_an_accepted_invite_cannot_be_revoked(cast: Cast, api_for: ApiFor) -> None:
    assert cast.alice.team is not None
    invite = invite_create(team=cast.alice.team, by=cast.alice).invite
    Invite.objects.filter(pk=invite.pk).update(accepted_at=invite.created_at)
    response = api_for(cast.alice).post("invites.revoke", {"id": str(invite.pk)})
    assert response.status_code == 400 and "already accepted" in response.json()["message"]


def test_a_read_token_of_an_admin_lists_but_does_not_invite(cast: Cast, api_for: ApiFor) -> None:
    api = api_for(cast.alice, TokenScope.READ)
    assert api.post("invites.list").status_code == 200
    assert api.post("invites.create").status_code == 403
