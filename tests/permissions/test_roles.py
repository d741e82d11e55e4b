"""A read-only member reads what the policy lets them and changes nothing, by any page or endpoint."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from permissions.models import Access, Role, TeamRole, TokenScope, User
from permissions.policy import can_manage_collections, can_write_collection, can_write_document
from rag.indexing.pipeline import index_documents
from rag.models import Conversation
from tests.conftest import ApiFor, Cast, SignIn
from tests.factories import CollectionFactory, CollectionMembershipFactory, DocumentFactory, UserFactory
from tests.permissions.test_token_scope import api_endpoints

WRITES = sorted(name for name, view in api_endpoints().items() if view.write_scope)
REFUSAL = {"error": "forbidden", "message": "You are a read-only member of your team: you can read, not change anything."}


@pytest.fixture
def reader(cast: Cast) -> User:
    """A read-only member given every right a collection and a document can give: the role still wins."""
    reader = UserFactory.create(team=cast.alice.team, username="rita", role=TeamRole.READ_ONLY)
    reader.save(update_fields=["password"])  # the factory sets the password without saving it
    CollectionMembershipFactory(collection=cast.handbook, user=reader, role=Role.READ_WRITE)
    return reader


def test_every_write_endpoint_is_checked_here() -> None:
    assert len(WRITES) >= 20 and {"documents.create", "rag.feedback", "invites.create", "apiKeys.create"} <= set(WRITES)


@pytest.mark.parametrize("endpoint", WRITES)
def test_a_read_only_member_is_refused_on_every_endpoint_that_writes_with_a_write_token(
    reader: User, api_for: ApiFor, endpoint: str
) -> None:
    response = api_for(reader, TokenScope.WRITE).post(endpoint, {})
    assert (response.status_code, response.json()) == (403, REFUSAL)


@pytest.mark.parametrize("endpoint", WRITES)
def test_a_read_only_member_is_refused_on_every_endpoint_that_writes_when_signed_in(reader: User, endpoint: str) -> None:
    client = APIClient()
    client.force_login(reader)
    response = client.post(f"/api/{endpoint}", {}, format="json")
    assert (response.status_code, response.json()) == (403, REFUSAL)


def test_a_read_only_member_reads_what_the_collections_let_them(reader: User, cast: Cast, api_for: ApiFor) -> None:
    document = DocumentFactory.create(collection=cast.handbook, title="Holidays")
    api = api_for(reader, TokenScope.WRITE)
    assert api.post("documents.info", {"id": str(document.pk)}).status_code == 200
    assert [c["name"] for c in api.post("collections.list").json()["data"]] == ["Handbook"]
    assert api.post("documents.info", {"id": str(DocumentFactory.create(collection=cast.private).pk)}).status_code == 404


def test_a_read_only_members_answers_are_kept_in_no_conversation(reader: User, cast: Cast, api_for: ApiFor) -> None:
    document = DocumentFactory.create(collection=cast.handbook, title="Holidays", text="Everyone gets 25 holidays a year.")
    index_documents(document_ids=[document.pk])
    response = api_for(reader, TokenScope.WRITE).post("rag.answer", {"query": "How many holidays do we get?"})
    assert response.status_code == 200 and response.json()["data"]["conversationId"] is None
    assert not Conversation.objects.exists()


def test_the_policy_refuses_a_read_only_member_every_write(reader: User, cast: Cast) -> None:
    open_to_all = CollectionFactory.create(team=cast.alice.team, default_access=Access.READ_WRITE)
    own_draft = DocumentFactory.create(collection=cast.handbook, created_by=reader, published_at=None)
    assert not can_write_collection(reader, open_to_all)
    assert not can_write_collection(reader, cast.handbook), "not even with a read-write membership"
    assert not can_write_document(reader, own_draft), "not even their own draft"
    reader.role = TeamRole.MEMBER
    assert can_write_collection(reader, open_to_all) and can_write_document(reader, own_draft)
    assert not can_manage_collections(reader)


def test_the_import_page_tells_a_read_only_member_they_cannot_import(reader: User, signed_in: SignIn) -> None:
    page = signed_in(reader).get("/import").content.decode()
    assert "read-only member" in page and 'id="import"' not in page


def test_the_rag_page_offers_a_read_only_member_no_feedback(reader: User, signed_in: SignIn) -> None:
    page = signed_in(reader).get("/rag").content.decode()
    assert "feedback.hidden = true;" in page and "your questions are not kept" in page


@pytest.mark.parametrize("path", ["/team/members", "/admin/"])
def test_a_read_only_member_reaches_no_page_that_manages(reader: User, signed_in: SignIn, path: str) -> None:
    response = signed_in(reader).get(path)
    assert response.status_code in (302, 403) and (response.status_code == 403 or "/admin/login" in response["Location"])


def test_a_read_only_member_cannot_post_to_the_members_pages(reader: User, cast: Cast, client: Client) -> None:
    client.force_login(reader)
    for path in ("/team/members/invite", f"/team/members/{cast.bob.pk}/role", f"/team/members/{cast.bob.pk}/deactivate"):
        assert client.post(path, {"role": TeamRole.ADMIN}).status_code == 403, path
    assert User.objects.get(pk=cast.bob.pk).role == TeamRole.MEMBER and User.objects.get(pk=cast.bob.pk).is_active
