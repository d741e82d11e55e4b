"""groups.*: team admins manage their team's groups; members list the groups they are in; other teams find nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from documents.models import CollectionMembership, Document
from permissions.models import Group, GroupMembership, Role
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory, GroupFactory, GroupMembershipFactory, UserFactory

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse


def error_of(response: _MonkeyPatchedResponse) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


@pytest.fixture
def ops(cast: Cast) -> Group:
    """A group of alice's team with bob in it."""
    group = GroupFactory.create(team=cast.alice.team, name="Ops")
    GroupMembershipFactory.create(group=group, user=cast.bob)
    return group


def test_a_team_admin_creates_a_group_and_adds_and_removes_a_member(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    created = alice.post("groups.create", {"name": "Support"})
    assert created.status_code == 200, created.content
    group_id = created.json()["data"]["id"]
    added = alice.post("groups.add_user", {"id": group_id, "userId": str(cast.bob.id)}).json()["data"]
    assert (added["memberCount"], added["members"]) == (1, [{"id": str(cast.bob.id), "username": "bob"}])
    removed = alice.post("groups.remove_user", {"id": group_id, "userId": str(cast.bob.id)}).json()["data"]
    assert (removed["memberCount"], removed["members"]) == (0, [])


def test_a_team_admin_lists_every_group_of_the_team_with_member_counts(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    GroupFactory.create(team=cast.alice.team, name="Empty")
    GroupFactory.create(team=cast.charlie.team, name="Theirs")
    body = api_for(cast.alice).post("groups.list").json()
    assert [(g["name"], g["memberCount"]) for g in body["data"]] == [("Empty", 0), ("Ops", 1)]
    assert body["pagination"]["total"] == 2


def test_a_member_lists_only_the_groups_they_are_in(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    GroupFactory.create(team=cast.alice.team, name="Board")
    assert [g["name"] for g in api_for(cast.bob).post("groups.list").json()["data"]] == ["Ops"]


def test_a_member_sees_a_group_they_are_in_but_not_one_they_are_not(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    board = GroupFactory.create(team=cast.alice.team, name="Board")
    bob = api_for(cast.bob)
    assert bob.post("groups.info", {"id": str(ops.id)}).json()["data"]["members"] == [{"id": str(cast.bob.id), "username": "bob"}]
    assert error_of(bob.post("groups.info", {"id": str(board.id)})) == (404, "not_found")


def test_a_member_who_is_not_admin_cannot_manage_groups(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    bob = api_for(cast.bob)
    assert error_of(bob.post("groups.create", {"name": "Mine"})) == (403, "forbidden")
    assert error_of(bob.post("groups.update", {"id": str(ops.id), "name": "Mine"})) == (403, "forbidden")
    assert error_of(bob.post("groups.add_user", {"id": str(ops.id), "userId": str(cast.alice.id)})) == (403, "forbidden")
    assert error_of(bob.post("groups.delete", {"id": str(ops.id)})) == (403, "forbidden")
    assert Group.objects.filter(team=cast.alice.team).values_list("name", flat=True).get() == "Ops"


@pytest.mark.parametrize("endpoint", ["groups.info", "groups.update", "groups.delete", "groups.add_user", "groups.remove_user"])
def test_another_teams_admin_finds_no_group(cast: Cast, api_for: ApiFor, ops: Group, endpoint: str) -> None:
    body = {"id": str(ops.id), "name": "Taken", "userId": str(cast.charlie.id)}
    fields = {"groups.info": ["id"], "groups.delete": ["id"], "groups.update": ["id", "name"]}.get(endpoint, ["id", "userId"])
    response = api_for(cast.charlie).post(endpoint, {name: body[name] for name in fields})
    assert error_of(response) == (404, "not_found")
    assert Group.objects.filter(pk=ops.pk, name="Ops").exists()


def test_a_person_of_another_team_cannot_be_added_to_a_group(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    response = api_for(cast.alice).post("groups.add_user", {"id": str(ops.id), "userId": str(cast.charlie.id)})
    assert error_of(response) == (404, "not_found")
    assert not GroupMembership.objects.filter(user=cast.charlie).exists()


def test_a_group_name_is_taken_once_per_team_whatever_its_case(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    response = api_for(cast.alice).post("groups.create", {"name": "OPS"})
    assert error_of(response) == (400, "validation_error")
    assert response.json()["message"] == 'name: your team already has a group named "OPS".'
    assert api_for(cast.charlie).post("groups.create", {"name": "Ops"}).status_code == 200


def test_renaming_a_group_to_its_own_name_is_no_clash(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    response = api_for(cast.alice).post("groups.update", {"id": str(ops.id), "name": "Ops"})
    assert response.status_code == 200, response.content


def test_deleting_a_group_takes_away_what_was_shared_through_it(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    CollectionMembership.objects.create(collection=cast.private, group=ops, role=Role.READ)
    document: Document = DocumentFactory.create(collection=cast.private, created_by=cast.alice)
    bob = api_for(cast.bob)
    assert bob.post("documents.info", {"id": str(document.id)}).status_code == 200
    deleted = api_for(cast.alice).post("groups.delete", {"id": str(ops.id)})
    assert deleted.json()["data"] == {"id": str(ops.id), "name": "Ops", "memberCount": 1}
    assert error_of(bob.post("documents.info", {"id": str(document.id)})) == (404, "not_found")
    assert Document.objects.filter(pk=document.pk, deleted_at__isnull=True).exists()


def test_an_inactive_person_cannot_be_added(cast: Cast, api_for: ApiFor, ops: Group) -> None:
    gone = UserFactory.create(team=cast.alice.team, is_active=False)
    response = api_for(cast.alice).post("groups.add_user", {"id": str(ops.id), "userId": str(gone.id)})
    assert error_of(response) == (404, "not_found")
