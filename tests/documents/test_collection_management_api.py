"""collections.info/update/delete and sharing with groups: team admins manage, members may not, other teams find nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from documents.models import Collection, CollectionMembership, Document
from documents.services import collection_restore
from permissions.models import Access, Role
from tests.conftest import ApiFor, Cast, SignIn
from tests.factories import CollectionFactory, DocumentFactory, GroupFactory, GroupMembershipFactory

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse


def error_of(response: _MonkeyPatchedResponse) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def test_info_shows_a_collection_and_whom_it_is_shared_with(cast: Cast, api_for: ApiFor) -> None:
    ops = GroupFactory.create(team=cast.alice.team, name="Ops")
    CollectionMembership.objects.create(collection=cast.private, group=ops, role=Role.READ_WRITE)
    data = api_for(cast.alice).post("collections.info", {"id": str(cast.private.id)}).json()["data"]
    assert (data["name"], data["defaultAccess"]) == ("Private", "none")
    assert data["grants"] == [
        {"kind": "group", "id": str(ops.id), "name": "Ops", "role": "read_write"},
        {"kind": "user", "id": str(cast.alice.id), "name": "alice", "role": "read_write"},
    ]


def test_info_of_a_collection_bob_cannot_read_or_of_another_team_is_not_found(cast: Cast, api_for: ApiFor) -> None:
    assert error_of(api_for(cast.bob).post("collections.info", {"id": str(cast.private.id)})) == (404, "not_found")
    assert error_of(api_for(cast.charlie).post("collections.info", {"id": str(cast.handbook.id)})) == (404, "not_found")


def test_a_team_admin_renames_a_collection_and_closes_it_to_the_team(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).post(
        "collections.update", {"id": str(cast.handbook.id), "name": "Staff handbook", "defaultAccess": "none"}
    )
    assert response.status_code == 200, response.content
    assert (response.json()["data"]["name"], response.json()["data"]["defaultAccess"]) == ("Staff handbook", "none")
    assert "Staff handbook" not in [c["name"] for c in api_for(cast.bob).post("collections.list").json()["data"]]


def test_an_update_leaves_the_fields_it_does_not_name(cast: Cast, api_for: ApiFor) -> None:
    api_for(cast.alice).post("collections.update", {"id": str(cast.handbook.id), "description": "How we work."})
    cast.handbook.refresh_from_db()
    assert (cast.handbook.name, cast.handbook.description, cast.handbook.default_access) == ("Handbook", "How we work.", "read")


def test_a_member_who_is_not_admin_cannot_update_or_delete_a_collection_they_read(cast: Cast, api_for: ApiFor) -> None:
    bob = api_for(cast.bob)
    assert error_of(bob.post("collections.update", {"id": str(cast.handbook.id), "name": "Mine"})) == (403, "forbidden")
    assert error_of(bob.post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})) == (403, "forbidden")
    cast.handbook.refresh_from_db()
    assert (cast.handbook.name, cast.handbook.deleted_at) == ("Handbook", None)


def test_another_teams_admin_finds_no_collection_to_update_or_delete(cast: Cast, api_for: ApiFor) -> None:
    charlie = api_for(cast.charlie)
    assert error_of(charlie.post("collections.update", {"id": str(cast.private.id), "name": "x"})) == (404, "not_found")
    assert error_of(charlie.post("collections.delete", {"id": str(cast.private.id), "confirm": True})) == (404, "not_found")


def test_deleting_a_collection_that_holds_documents_needs_confirm(cast: Cast, api_for: ApiFor) -> None:
    DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    response = api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id)})
    assert error_of(response) == (409, "collection_not_empty")
    assert '"confirm": true' in response.json()["message"]
    assert Collection.objects.get(pk=cast.handbook.pk).deleted_at is None


def test_a_confirmed_delete_deletes_its_documents_and_hides_the_collection(cast: Cast, api_for: ApiFor) -> None:
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    response = api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})
    assert response.status_code == 200, response.content
    assert response.json()["data"]["deletedAt"] is not None
    bob = api_for(cast.bob)
    assert error_of(bob.post("documents.info", {"id": str(document.id)})) == (404, "not_found")
    assert "Handbook" not in [c["name"] for c in bob.post("collections.list").json()["data"]]
    assert error_of(api_for(cast.alice).post("collections.info", {"id": str(cast.handbook.id)})) == (404, "not_found")


def test_a_deleted_collection_takes_no_new_documents(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    alice.post("collections.delete", {"id": str(cast.handbook.id)})
    response = alice.post("documents.create", {"title": "Late", "collectionId": str(cast.handbook.id)})
    assert error_of(response) == (404, "not_found")


def test_an_empty_collection_is_deleted_without_confirm(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).post("collections.delete", {"id": str(cast.private.id)})
    assert response.status_code == 200, response.content
    assert Collection.objects.get(pk=cast.private.pk).deleted_at is not None


def test_restoring_a_collection_brings_back_the_documents_deleted_with_it_only(cast: Cast, api_for: ApiFor) -> None:
    earlier = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Deleted before")
    kept = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Deleted with it")
    alice = api_for(cast.alice)
    alice.post("documents.delete", {"id": str(earlier.id)})
    alice.post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})
    collection_restore(collection=Collection.objects.get(pk=cast.handbook.pk))
    titles = [
        d["title"] for d in api_for(cast.bob).post("documents.list", {"collectionId": str(cast.handbook.id)}).json()["data"]
    ]
    assert titles == [kept.title]
    assert Document.objects.get(pk=earlier.pk).deleted_at is not None


def test_sharing_a_collection_with_a_group_opens_it_to_its_members(cast: Cast, api_for: ApiFor) -> None:
    readers = GroupFactory.create(team=cast.alice.team, name="Readers")
    GroupMembershipFactory.create(group=readers, user=cast.bob)
    document = DocumentFactory.create(collection=cast.private, created_by=cast.alice)
    alice, bob = api_for(cast.alice), api_for(cast.bob)
    shared = alice.post("collections.add_group", {"id": str(cast.private.id), "groupId": str(readers.id), "role": "read"})
    assert shared.status_code == 200, shared.content
    assert {"kind": "group", "id": str(readers.id), "name": "Readers", "role": "read"} in shared.json()["data"]["grants"]
    assert bob.post("documents.info", {"id": str(document.id)}).status_code == 200
    alice.post("collections.remove_group", {"id": str(cast.private.id), "groupId": str(readers.id)})
    assert error_of(bob.post("documents.info", {"id": str(document.id)})) == (404, "not_found")


def test_another_teams_group_is_not_found_when_sharing(cast: Cast, api_for: ApiFor) -> None:
    theirs = GroupFactory.create(team=cast.charlie.team)
    response = api_for(cast.alice).post("collections.add_group", {"id": str(cast.private.id), "groupId": str(theirs.id)})
    assert error_of(response) == (404, "not_found")
    assert not CollectionMembership.objects.filter(group=theirs).exists()


def test_a_reader_cannot_share_a_collection_with_a_group(cast: Cast, api_for: ApiFor) -> None:
    group = GroupFactory.create(team=cast.alice.team)
    response = api_for(cast.bob).post("collections.add_group", {"id": str(cast.handbook.id), "groupId": str(group.id)})
    assert error_of(response) == (403, "forbidden")


def test_another_team_cannot_share_our_collection_with_its_group(cast: Cast, api_for: ApiFor) -> None:
    theirs = GroupFactory.create(team=cast.charlie.team)
    response = api_for(cast.charlie).post("collections.add_group", {"id": str(cast.handbook.id), "groupId": str(theirs.id)})
    assert error_of(response) == (404, "not_found")


def test_a_collection_in_another_team_with_the_same_name_is_untouched_by_a_delete(cast: Cast, api_for: ApiFor) -> None:
    theirs = CollectionFactory.create(team=cast.charlie.team, name="Handbook", default_access=Access.READ)
    api_for(cast.alice).post("collections.delete", {"id": str(cast.handbook.id), "confirm": True})
    assert Collection.objects.get(pk=theirs.pk).deleted_at is None


def test_a_second_collection_of_the_same_name_is_refused_until_the_first_is_deleted(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    created = alice.post("collections.create", {"name": "Ledger"})
    assert created.status_code == 200, created.content
    for body in ({"name": "ledger "}, {"name": "LEDGER", "defaultAccess": "none"}):
        response = alice.post("collections.create", body)
        assert response.status_code == 400 and response.json()["message"].startswith("name: The team already has"), body
    renamed = alice.post("collections.update", {"id": str(cast.handbook.id), "name": "Ledger"})
    assert renamed.status_code == 400 and "already has a collection named" in renamed.json()["message"]
    assert alice.post("collections.delete", {"id": created.json()["data"]["id"]}).status_code == 200
    assert alice.post("collections.create", {"name": "Ledger"}).status_code == 200, "a deleted collection's name is free"


def test_the_collections_page_shows_the_name_taken_instead_of_a_second_shelf(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    response = client.post("/team/collections", {"name": "Handbook", "description": "", "default_access": "read"})
    assert response.status_code == 400 and "The team already has a collection named" in response.content.decode()
