"""Fields keep their JSON types, and a `none` collection is usable by its creator and team admins."""

from __future__ import annotations

import pytest

from documents.models import Document
from permissions.models import Access
from tests.conftest import ApiFor, Cast
from tests.factories import CollectionFactory, UserFactory


@pytest.mark.parametrize(
    ("field", "value"),
    [("text", 123), ("title", ["a"]), ("publish", "yes"), ("publish", 1), ("collectionId", 42), ("title", {"a": 1})],
)
def test_a_field_of_the_wrong_json_type_is_refused_not_coerced(cast: Cast, api_for: ApiFor, field: str, value: object) -> None:
    body = {"title": "Typed", "text": "Body", "collectionId": str(cast.handbook.id), "publish": True, field: value}
    response = api_for(cast.alice).post("documents.create", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "validation_error" and response.json()["message"].startswith(f"{field}:")
    assert not Document.objects.exists()


def test_a_limit_sent_as_a_string_is_refused(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.bob).post("documents.list", {"limit": "5"})
    assert response.status_code == 400 and response.json()["message"] == "limit: must be an integer."


def test_the_creator_of_a_none_collection_can_add_documents_to_it_and_share_it(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    created = alice.post("collections.create", {"name": "Board", "defaultAccess": "none"}).json()["data"]
    document = alice.post(
        "documents.create", {"title": "Minutes", "text": "Agreed.", "collectionId": created["id"], "publish": True}
    )
    assert document.status_code == 200, document.content
    shared = alice.post("collections.add_user", {"id": created["id"], "userId": str(cast.bob.id), "role": "read"})
    assert shared.status_code == 200, shared.content
    titles = [d["title"] for d in api_for(cast.bob).post("documents.list", {"collectionId": created["id"]}).json()["data"]]
    assert titles == ["Minutes"]


def test_a_team_admin_can_add_to_and_share_a_none_collection_someone_else_created(cast: Cast, api_for: ApiFor) -> None:
    other_admin = UserFactory.create(team=cast.alice.team, username="dora", is_team_admin=True)
    board = CollectionFactory.create(team=cast.alice.team, name="Board", default_access=Access.NONE)
    admin = api_for(other_admin)
    created = admin.post("documents.create", {"title": "Minutes", "text": "Agreed.", "collectionId": str(board.id)})
    assert created.status_code == 200, created.content
    shared = admin.post("collections.add_user", {"id": str(board.id), "userId": str(cast.bob.id), "role": "read"})
    assert shared.status_code == 200, shared.content


def test_a_member_who_is_not_admin_still_cannot_reach_a_none_collection(cast: Cast, api_for: ApiFor) -> None:
    board = CollectionFactory.create(team=cast.alice.team, name="Board", default_access=Access.NONE)
    response = api_for(cast.bob).post("documents.create", {"title": "Sneaky", "collectionId": str(board.id)})
    assert response.status_code == 404
    response = api_for(cast.charlie).post("collections.add_user", {"id": str(board.id), "userId": str(cast.charlie.id)})
    assert response.status_code == 404
