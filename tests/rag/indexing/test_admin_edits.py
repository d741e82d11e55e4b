"""Writes made in the Django admin reach the index as the API's do: through the document services.

Each test drives the real admin views with a staff user's client; indexing runs in-process (eager tasks)
once the admin's transaction commits, and what the index holds is read back through `rag.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from documents import services
from documents.models import Collection, Document
from permissions.models import Access, User
from rag.indexing.pipeline import index_documents
from rag.models import Chunk, IndexStatus
from tests.conftest import ApiFor, Cast
from tests.factories import CollectionFactory, DocumentFactory

PASSWORD = "# Vault\n\nThe vault password is hunter2swordfish. Rotate it every month."
NO_PASSWORD = "# Vault\n\nThe vault password lives in the team's KeePassXC file now."

Capture = Callable[..., Any]


@pytest.fixture
def operator(cast: Cast, client: Client) -> Client:
    """A staff user (no superuser) who may manage documents and collections in the admin, signed in."""
    user = User.objects.create_user("operator", password="x", is_staff=True)
    codenames = [f"{action}_{model}" for action in ("view", "add", "change", "delete") for model in ("document", "collection")]
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="documents", codename__in=codenames))
    client.force_login(user)
    return client


def found(api_for: ApiFor, user: User, query: str) -> set[str]:
    """The titles of the passages a keyword search finds for `user`."""
    response = api_for(user).post("rag.search", {"query": query, "mode": "keyword"})
    assert response.status_code == 200, response.content
    return {hit["document"]["title"] for hit in response.json()["data"]}


def change_form(document: Document, **changes: Any) -> dict[str, Any]:
    """The admin's change form for `document` as a browser posts it, with `changes`.

    It also carries the fields the admin showed as inputs before it went through the services
    (team, dates): posted to a form without them, they are ignored.
    """
    published = document.published_at
    data = {
        "team": str(document.team_id),
        "collection": str(document.collection_id),
        "title": document.title,
        "text": document.text,
        "tags": ",".join(document.tags),
        "published_at_0": published.strftime("%Y-%m-%d") if published else "",
        "published_at_1": published.strftime("%H:%M:%S") if published else "",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    return data | changes


def edit(operator: Client, capture: Capture, document: Document, **changes: Any) -> Any:
    with capture(execute=True):
        return operator.post(f"/admin/documents/document/{document.pk}/change/", change_form(document, **changes))


@pytest.fixture
def vault(cast: Cast) -> Document:
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Zanzibar protocol", text=PASSWORD)
    index_documents(document_ids=[document.pk])
    return document


def test_a_text_edit_in_the_admin_makes_a_new_version(
    cast: Cast, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    response = edit(operator, django_capture_on_commit_callbacks, vault, text=NO_PASSWORD)
    assert response.status_code == 302, response.content.decode()
    vault.refresh_from_db()
    assert (vault.version, vault.text) == (2, NO_PASSWORD)


def test_text_removed_in_the_admin_is_no_longer_found(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    assert found(api_for, cast.bob, "hunter2swordfish") == {"Zanzibar protocol"}
    edit(operator, django_capture_on_commit_callbacks, vault, text=NO_PASSWORD)
    assert found(api_for, cast.bob, "hunter2swordfish") == set()


def test_text_written_in_the_admin_is_found(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    edit(operator, django_capture_on_commit_callbacks, vault, text=NO_PASSWORD)
    assert found(api_for, cast.bob, "keepassxc") == {"Zanzibar protocol"}


def test_a_title_changed_in_the_admin_renames_the_passages(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    edit(operator, django_capture_on_commit_callbacks, vault, title="Quokka protocol")
    assert (found(api_for, cast.bob, "zanzibar"), found(api_for, cast.bob, "quokka")) == (set(), {"Quokka protocol"})


def test_a_document_added_in_the_admin_is_indexed(
    cast: Cast, api_for: ApiFor, operator: Client, django_capture_on_commit_callbacks: Capture
) -> None:
    form = {
        "team": str(cast.handbook.team_id),
        "collection": str(cast.handbook.pk),
        "title": "Llama care",
        "text": "Llamas need shearing once a year.",
        "tags": "",
        "publish": "on",
        "published_at_0": "2024-01-01",
        "published_at_1": "00:00:00",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post("/admin/documents/document/add/", form)
    assert response.status_code == 302, response.content.decode()
    assert found(api_for, cast.bob, "llamas shearing") == {"Llama care"}


def test_the_admin_refuses_to_move_a_document_to_another_team(
    cast: Cast, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    theirs = CollectionFactory.create(team=cast.charlie.team, name="Theirs")
    response = edit(operator, django_capture_on_commit_callbacks, vault, collection=str(theirs.pk), team=str(theirs.team_id))
    assert response.status_code == 200 and "collection of its own team" in response.content.decode()
    vault.refresh_from_db()
    assert (vault.collection_id, vault.team_id) == (cast.handbook.pk, cast.alice.team_id)


def test_a_document_moved_in_the_admin_is_found_only_by_readers_of_its_new_collection(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    response = edit(operator, django_capture_on_commit_callbacks, vault, collection=str(cast.private.pk))
    assert response.status_code == 302, response.content.decode()
    assert (found(api_for, cast.bob, "hunter2swordfish"), found(api_for, cast.alice, "hunter2swordfish")) == (
        set(),
        {"Zanzibar protocol"},
    )


def test_the_admin_publish_action_makes_a_draft_readable(
    cast: Cast, api_for: ApiFor, operator: Client, django_capture_on_commit_callbacks: Capture
) -> None:
    draft = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Draft", text=PASSWORD, published_at=None
    )
    index_documents(document_ids=[draft.pk])
    assert found(api_for, cast.bob, "hunter2swordfish") == set()
    with django_capture_on_commit_callbacks(execute=True):
        operator.post("/admin/documents/document/", {"action": "publish", "_selected_action": [str(draft.pk)]})
    assert found(api_for, cast.bob, "hunter2swordfish") == {"Draft"}


def test_the_admin_archive_and_unarchive_actions_hide_and_show_a_document(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document
) -> None:
    operator.post("/admin/documents/document/", {"action": "archive", "_selected_action": [str(vault.pk)]})
    hidden = found(api_for, cast.bob, "hunter2swordfish")
    operator.post("/admin/documents/document/", {"action": "unarchive", "_selected_action": [str(vault.pk)]})
    assert (hidden, found(api_for, cast.bob, "hunter2swordfish")) == (set(), {"Zanzibar protocol"})


def test_a_deleted_document_restored_in_the_admin_is_indexed_again(
    cast: Cast, api_for: ApiFor, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        services.document_delete(document=vault)
    assert not Chunk.objects.filter(document=vault).exists()
    with django_capture_on_commit_callbacks(execute=True):
        operator.post("/admin/documents/document/", {"action": "restore", "_selected_action": [str(vault.pk)]})
    assert found(api_for, cast.bob, "hunter2swordfish") == {"Zanzibar protocol"}


def test_deleting_a_document_in_the_admin_removes_its_passages(
    cast: Cast, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(f"/admin/documents/document/{vault.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert (Chunk.objects.filter(document_id=vault.pk).count(), IndexStatus.objects.filter(document_id=vault.pk).count()) == (
        0,
        0,
    )


def test_deleting_documents_in_bulk_in_the_admin_removes_their_passages(
    cast: Cast, operator: Client, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(
            "/admin/documents/document/", {"action": "delete_selected", "_selected_action": [str(vault.pk)], "post": "yes"}
        )
    assert not Chunk.objects.filter(document_id=vault.pk).exists()


def test_a_collection_keeps_its_team_in_the_admin(cast: Cast, operator: Client, vault: Document) -> None:
    form = {
        "team": str(cast.charlie.team_id),
        "name": "Handbook",
        "description": "",
        "default_access": Access.READ,
        "created_by": "",
        "created_at_0": "2024-01-01",
        "created_at_1": "00:00:00",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    response = operator.post(f"/admin/documents/collection/{cast.handbook.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()
    assert Collection.objects.get(pk=cast.handbook.pk).team_id == cast.alice.team_id


def test_the_admin_offers_to_publish_a_draft_only(cast: Cast, operator: Client, vault: Document) -> None:
    draft = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, published_at=None)
    pages = [operator.get(f"/admin/documents/document/{d.pk}/change/") for d in (draft, vault)]
    assert [('name="publish"' in page.content.decode()) for page in pages] == [True, False]


def test_the_admin_names_each_collection_with_its_team(cast: Cast, operator: Client) -> None:
    page = operator.get("/admin/documents/document/add/").content.decode()
    assert "Acme / Handbook" in page
