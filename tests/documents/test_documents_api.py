"""The documents and collections RPC API: behaviour, and the error contract of every endpoint."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from django.test import Client
from pytest_django import Settings

from documents.models import Document
from permissions.models import Access, TokenScope
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory, UserFactory

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse

READ_ENDPOINTS = ["documents.info", "documents.list", "collections.list", "apiKeys.list"]
WRITE_ENDPOINTS = [
    "documents.create",
    "documents.update",
    "documents.delete",
    "documents.archive",
    "documents.unarchive",
    "documents.publish",
    "documents.add_user",
    "documents.remove_user",
    "collections.create",
    "collections.add_user",
    "collections.remove_user",
    "apiKeys.create",
    "apiKeys.revoke",
]
ALL_ENDPOINTS = READ_ENDPOINTS + WRITE_ENDPOINTS


def valid_body(endpoint: str, cast: Cast, doc: Document) -> dict[str, str]:
    return {
        "documents.create": {"title": "T", "text": "x", "collectionId": str(cast.handbook.id)},
        "documents.info": {"id": str(doc.id)},
        "documents.list": {},
        "documents.update": {"id": str(doc.id), "title": "New"},
        "documents.delete": {"id": str(doc.id)},
        "documents.archive": {"id": str(doc.id)},
        "documents.unarchive": {"id": str(doc.id)},
        "documents.publish": {"id": str(doc.id)},
        "documents.add_user": {"id": str(doc.id), "userId": str(cast.bob.id)},
        "documents.remove_user": {"id": str(doc.id), "userId": str(cast.bob.id)},
        "collections.create": {"name": "New"},
        "collections.list": {},
        "collections.add_user": {"id": str(cast.handbook.id), "userId": str(cast.bob.id)},
        "collections.remove_user": {"id": str(cast.handbook.id), "userId": str(cast.bob.id)},
        "apiKeys.create": {"scope": "read"},
        "apiKeys.list": {},
        "apiKeys.revoke": {"id": str(uuid.uuid4())},
    }[endpoint]


def assert_error(response: _MonkeyPatchedResponse, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"] == code and isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize("endpoint", ALL_ENDPOINTS)
@pytest.mark.parametrize("header", [None, "Bearer nonsense", "Bearer cairn_000000000000_forged", "Token abc"])
def test_every_endpoint_rejects_a_missing_or_bad_token_with_401(
    cast: Cast, api_for: ApiFor, endpoint: str, header: str | None
) -> None:
    api = api_for(None)
    if header:
        api.client.credentials(HTTP_AUTHORIZATION=header)
    assert_error(
        api.post(endpoint, valid_body(endpoint, cast, DocumentFactory.create(collection=cast.handbook))), 401, "unauthorized"
    )


@pytest.mark.parametrize("endpoint", WRITE_ENDPOINTS)
def test_every_write_endpoint_refuses_a_read_token_with_403(cast: Cast, api_for: ApiFor, endpoint: str) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    assert_error(api_for(cast.alice, TokenScope.READ).post(endpoint, valid_body(endpoint, cast, doc)), 403, "forbidden")


@pytest.mark.parametrize(
    "endpoint",
    [
        e
        for e in ALL_ENDPOINTS
        if e not in ("documents.list", "collections.list", "apiKeys.list", "apiKeys.create", "collections.create")
    ],
)
def test_every_endpoint_answers_404_for_another_teams_object(cast: Cast, api_for: ApiFor, endpoint: str) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    response = api_for(cast.charlie).post(endpoint, valid_body(endpoint, cast, doc))
    assert_error(response, 404, "not_found")


MALFORMED = ["[1, 2]", "{not json", '"text"', '{"id": "not-a-uuid", "title": 5, "collectionId": [], "limit": "many", "scope": 7}']


@pytest.mark.parametrize(
    ("endpoint", "body"),
    # apiKeys.list takes no fields, so the last body is well-formed for it.
    [(e, b) for e in ALL_ENDPOINTS for b in MALFORMED if not (e == "apiKeys.list" and b.startswith("{"))],
)
def test_every_endpoint_answers_400_with_the_error_shape_to_a_malformed_body(
    cast: Cast, api_for: ApiFor, endpoint: str, body: str
) -> None:
    response = api_for(cast.alice).client.post(f"/api/{endpoint}", body, content_type="application/json")
    assert_error(response, 400, "validation_error")


def test_a_huge_limit_is_refused(cast: Cast, api_for: ApiFor) -> None:
    assert_error(api_for(cast.alice).post("documents.list", {"limit": 10**9}), 400, "validation_error")


def test_get_is_not_allowed(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).client.get("/api/documents.list")
    assert_error(response, 405, "method_not_allowed")


def test_alice_creates_publishes_and_lists_a_document(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    created = alice.post("documents.create", {"title": "Onboarding", "text": "# Welcome", "collectionId": str(cast.handbook.id)})
    assert created.status_code == 200
    doc_id = created.json()["data"]["id"]
    assert created.json()["data"]["publishedAt"] is None
    assert doc_id not in [d["id"] for d in api_for(cast.bob).post("documents.list").json()["data"]]
    alice.post("documents.publish", {"id": doc_id})
    listed = api_for(cast.bob).post("documents.list").json()
    assert doc_id in [d["id"] for d in listed["data"]]
    assert listed["pagination"]["total"] == 1


def test_a_content_change_bumps_the_version_and_a_title_change_does_not(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, text="one")
    alice = api_for(cast.alice)
    assert alice.post("documents.update", {"id": str(doc.id), "title": "Renamed"}).json()["data"]["version"] == 1
    assert alice.post("documents.update", {"id": str(doc.id), "text": "two"}).json()["data"]["version"] == 2
    assert alice.post("documents.update", {"id": str(doc.id), "text": "two"}).json()["data"]["version"] == 2


def test_a_document_whose_author_was_deleted_can_still_be_edited(cast: Cast, api_for: ApiFor) -> None:
    author = UserFactory.create(team=cast.alice.team)
    doc = DocumentFactory.create(collection=cast.handbook, created_by=author, text="one")
    author.delete()
    response = api_for(cast.alice).post("documents.update", {"id": str(doc.id), "text": "two"})
    assert response.status_code == 200, response.json()
    assert response.json()["data"]["createdBy"] is None


def test_bob_can_read_but_not_change_a_handbook_document(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    bob = api_for(cast.bob)
    assert bob.post("documents.info", {"id": str(doc.id)}).status_code == 200
    assert_error(bob.post("documents.update", {"id": str(doc.id), "text": "hijack"}), 403, "forbidden")
    assert Document.objects.get(pk=doc.pk).text == doc.text


def test_bob_gets_404_for_a_private_document_until_it_is_shared_with_him(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.private, created_by=cast.alice)
    bob = api_for(cast.bob)
    assert_error(bob.post("documents.info", {"id": str(doc.id)}), 404, "not_found")
    assert api_for(cast.alice).post("documents.add_user", {"id": str(doc.id), "userId": str(cast.bob.id)}).status_code == 200
    assert bob.post("documents.info", {"id": str(doc.id)}).status_code == 200
    api_for(cast.alice).post("documents.remove_user", {"id": str(doc.id), "userId": str(cast.bob.id)})
    assert_error(bob.post("documents.info", {"id": str(doc.id)}), 404, "not_found")


def test_collection_membership_opens_a_private_collection(cast: Cast, api_for: ApiFor) -> None:
    doc = DocumentFactory.create(collection=cast.private, created_by=cast.alice)
    alice, bob = api_for(cast.alice), api_for(cast.bob)
    assert_error(bob.post("documents.list", {"collectionId": str(cast.private.id)}), 404, "not_found")
    alice.post("collections.add_user", {"id": str(cast.private.id), "userId": str(cast.bob.id), "role": "read"})
    assert [d["id"] for d in bob.post("documents.list", {"collectionId": str(cast.private.id)}).json()["data"]] == [str(doc.id)]
    alice.post("collections.remove_user", {"id": str(cast.private.id), "userId": str(cast.bob.id)})
    assert_error(bob.post("documents.info", {"id": str(doc.id)}), 404, "not_found")


def test_adding_a_user_from_another_team_is_404(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).post("collections.add_user", {"id": str(cast.private.id), "userId": str(cast.charlie.id)})
    assert_error(response, 404, "not_found")


def test_only_team_admins_create_collections(cast: Cast, api_for: ApiFor) -> None:
    assert_error(api_for(cast.bob).post("collections.create", {"name": "Mine"}), 403, "forbidden")
    created = api_for(cast.alice).post("collections.create", {"name": "Eng", "defaultAccess": Access.NONE})
    assert created.json()["data"]["defaultAccess"] == "none"
    assert "Eng" not in [c["name"] for c in api_for(cast.bob).post("collections.list").json()["data"]]


def test_delete_and_archive_hide_documents(cast: Cast, api_for: ApiFor) -> None:
    gone, shelved = DocumentFactory.create(collection=cast.handbook), DocumentFactory.create(collection=cast.handbook)
    alice = api_for(cast.alice)
    alice.post("documents.delete", {"id": str(gone.id)})
    alice.post("documents.archive", {"id": str(shelved.id)})
    assert api_for(cast.bob).post("documents.list").json()["data"] == []
    archived = api_for(cast.bob).post("documents.list", {"archived": True}).json()["data"]
    assert [d["id"] for d in archived] == [str(shelved.id)]
    assert_error(alice.post("documents.info", {"id": str(gone.id)}), 404, "not_found")


def test_an_oversized_request_body_is_refused_without_a_500(cast: Cast, api_for: ApiFor, settings: Settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = api_for(cast.alice).post(
        "documents.create", {"title": "big", "text": "x" * 5000, "collectionId": str(cast.handbook.id)}
    )
    assert response.status_code in (400, 413)
    assert response.json()["error"]


def test_the_openapi_schema_is_served(client: Client) -> None:
    response = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert "/api/documents.create" in response.json()["paths"]
