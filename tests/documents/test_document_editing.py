"""Changing a document from its page: edit with a preview, move, tags, archive, delete; only for those who may write.

Each test drives the real views with a signed-in client. Indexing runs in-process (eager tasks) once a save
commits, when the test executes the commit's callbacks; what the index holds is read back through `rag.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from documents.models import Collection, Document
from permissions.models import Access, Role, User
from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from tests.conftest import ApiFor, Cast, SignIn
from tests.factories import CollectionFactory, CollectionMembershipFactory, DocumentFactory

Capture = Callable[..., Any]

VAULT = "# Vault\n\nThe vault password is hunter2swordfish. Rotate it every month."
NEW_VAULT = "# Vault\n\nThe vault password lives in the team's KeePassXC file now."


@pytest.fixture
def vault(cast: Cast) -> Document:
    """alice's published handbook document (bob reads it), indexed."""
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Vault", text=VAULT)
    index_documents(document_ids=[document.pk])
    return document


def found(api_for: ApiFor, user: User, query: str) -> set[str]:
    """The titles of the passages a keyword search finds for `user`."""
    response = api_for(user).post("rag.search", {"query": query, "mode": "keyword"})
    assert response.status_code == 200, response.content
    return {hit["document"]["title"] for hit in response.json()["data"]}


def save(client: Client, document: Document, **changes: Any) -> Any:
    form = {"title": document.title, "text": document.text, "version": document.version} | changes
    return client.post(f"/doc/{document.pk}/edit", form)


CHANGES = ["edit", "preview", "move", "tags", "archive", "unarchive", "delete"]


def test_a_reader_sees_no_controls_and_every_change_is_refused(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    bob = signed_in(cast.bob)
    page = bob.get(f"/doc/{vault.pk}").content.decode()
    assert f'href="/doc/{vault.pk}/edit"' not in page and "/archive" not in page and "/delete" not in page
    assert bob.get(f"/doc/{vault.pk}/edit").status_code == 403
    refused = {
        change: bob.post(f"/doc/{vault.pk}/{change}", {"collection": str(cast.private.pk)}).status_code for change in CHANGES
    }
    assert refused == dict.fromkeys(CHANGES, 403)
    vault.refresh_from_db()
    assert (vault.version, vault.collection_id, vault.archived_at, vault.deleted_at) == (1, cast.handbook.pk, None, None)


def test_another_team_gets_not_found_for_the_page_and_every_change(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    charlie = signed_in(cast.charlie)
    assert charlie.get(f"/doc/{vault.pk}/edit").status_code == 404
    assert charlie.get(f"/doc/{vault.pk}/index-state").status_code == 404
    refused = {change: charlie.post(f"/doc/{vault.pk}/{change}").status_code for change in CHANGES}
    assert refused == dict.fromkeys(CHANGES, 404)


def test_a_writer_sees_the_controls(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    page = signed_in(cast.alice).get(f"/doc/{vault.pk}").content.decode()
    assert all(f'"/doc/{vault.pk}/{change}"' in page for change in ("edit", "archive", "tags", "move", "delete"))


def test_a_save_from_the_edit_page_makes_a_new_version_that_replaces_the_old_text_in_search(
    signed_in: SignIn, cast: Cast, api_for: ApiFor, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    assert found(api_for, cast.bob, "hunter2swordfish") == {"Vault"}
    with django_capture_on_commit_callbacks(execute=True):
        response = save(signed_in(cast.alice), vault, text=NEW_VAULT)
    assert (response.status_code, response["Location"]) == (302, f"/doc/{vault.pk}")
    vault.refresh_from_db()
    assert (vault.version, vault.text) == (2, NEW_VAULT)
    assert (found(api_for, cast.bob, "hunter2swordfish"), found(api_for, cast.bob, "keepassxc")) == (set(), {"Vault"})


def test_after_a_save_the_page_shows_indexing_until_the_new_version_is_indexed(
    signed_in: SignIn, cast: Cast, vault: Document
) -> None:
    alice = signed_in(cast.alice)
    save(alice, vault, text=NEW_VAULT)  # the commit's callbacks never run here: nothing is queued yet
    page = alice.get(f"/doc/{vault.pk}").content.decode()
    assert "Saved as version 2." in page and 'data-state="pending"' in page and "Indexing…" in page
    assert alice.get(f"/doc/{vault.pk}/index-state").json() == {"version": 2, "state": "pending"}
    index_documents(document_ids=[vault.pk])
    assert alice.get(f"/doc/{vault.pk}/index-state").json() == {"version": 2, "state": "indexed"}
    assert 'data-state="indexed"' in alice.get(f"/doc/{vault.pk}").content.decode()


def test_the_edit_page_shows_the_text_and_its_preview(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    page = signed_in(cast.alice).get(f"/doc/{vault.pk}/edit").content.decode()
    assert "hunter2swordfish. Rotate it every month.</textarea>" in page
    assert "<p>The vault password is hunter2swordfish. Rotate it every month.</p>" in page.split('id="preview"')[1]


def test_the_preview_is_the_page_renderer_s_safe_html_of_the_posted_text(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    text = "# Vault\n\n| Key | Where |\n| --- | --- |\n| admin | KeePassXC |\n\n<script>alert(1)</script>"
    response = signed_in(cast.alice).post(f"/doc/{vault.pk}/preview", {"title": "Vault", "text": text})
    html = response.json()["html"]
    assert "<table>" in html and "<td>KeePassXC</td>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "<h1>" not in html, "the title is shown once, above the text"


def test_a_save_over_a_version_saved_meanwhile_is_refused_and_keeps_the_text(
    signed_in: SignIn, cast: Cast, vault: Document
) -> None:
    alice = signed_in(cast.alice)
    save(alice, vault, text="Someone else's change.")
    response = save(alice, vault, text=NEW_VAULT, version=1)
    page = response.content.decode()
    assert response.status_code == 400 and "Someone saved version 2 while you were editing" in page
    assert "KeePassXC file now.</textarea>" in page and 'name="version" value="2"' in page
    vault.refresh_from_db()
    assert (vault.version, vault.text) == (2, "Someone else's change.")


def test_an_empty_title_is_refused(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    response = save(signed_in(cast.alice), vault, title="  ")
    assert response.status_code == 400 and "This field is required." in response.content.decode()


@pytest.fixture
def runbooks(cast: Cast) -> Collection:
    """A collection alice may write to and bob may read."""
    runbooks = CollectionFactory.create(team=cast.alice.team, name="Runbooks", default_access=Access.READ)
    CollectionMembershipFactory.create(collection=runbooks, user=cast.alice, role=Role.READ_WRITE)
    return runbooks


def test_a_document_moves_to_a_collection_its_writer_may_write(
    signed_in: SignIn, cast: Cast, vault: Document, runbooks: Collection
) -> None:
    alice = signed_in(cast.alice)
    assert f'<option value="{runbooks.pk}">Runbooks</option>' in alice.get(f"/doc/{vault.pk}").content.decode()
    response = alice.post(f"/doc/{vault.pk}/move", {"collection": str(runbooks.pk)})
    vault.refresh_from_db()
    assert (response.status_code, vault.collection_id) == (302, runbooks.pk)
    assert "Moved to Runbooks." in alice.get(f"/doc/{vault.pk}").content.decode()


def test_a_move_into_a_collection_one_only_reads_is_refused_and_into_an_invisible_one_not_found(
    signed_in: SignIn, cast: Cast, runbooks: Collection
) -> None:
    mine = CollectionFactory.create(team=cast.bob.team, name="Scratch", default_access=Access.READ_WRITE)
    draft = DocumentFactory.create(collection=mine, created_by=cast.bob, title="Bob's notes")
    bob = signed_in(cast.bob)
    assert bob.post(f"/doc/{draft.pk}/move", {"collection": str(runbooks.pk)}).status_code == 403
    assert bob.post(f"/doc/{draft.pk}/move", {"collection": str(cast.private.pk)}).status_code == 404
    theirs = CollectionFactory.create(team=cast.charlie.team)
    assert bob.post(f"/doc/{draft.pk}/move", {"collection": str(theirs.pk)}).status_code == 404
    draft.refresh_from_db()
    assert draft.collection_id == mine.pk


def test_tags_are_saved_normalised(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    signed_in(cast.alice).post(f"/doc/{vault.pk}/tags", {"tags": "Security,  Passwords , security"})
    vault.refresh_from_db()
    assert (vault.tags, vault.version) == (["passwords", "security"], 1)


def test_bad_tags_are_explained_and_not_saved(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    alice = signed_in(cast.alice)
    alice.post(f"/doc/{vault.pk}/tags", {"tags": "x" * 60})
    vault.refresh_from_db()
    assert vault.tags == []
    assert "Tags not saved: a tag has at most 50 characters" in alice.get(f"/doc/{vault.pk}").content.decode()


def test_an_archived_document_leaves_search_and_comes_back_when_restored(
    signed_in: SignIn, cast: Cast, api_for: ApiFor, vault: Document
) -> None:
    alice = signed_in(cast.alice)
    alice.post(f"/doc/{vault.pk}/archive")
    page = alice.get(f"/doc/{vault.pk}").content.decode()
    assert found(api_for, cast.bob, "hunter2swordfish") == set()
    assert "Restore from archive" in page and " · archived" in page
    alice.post(f"/doc/{vault.pk}/unarchive")
    assert found(api_for, cast.bob, "hunter2swordfish") == {"Vault"}


def test_a_deleted_document_is_gone_from_its_page_and_the_index(
    signed_in: SignIn, cast: Cast, vault: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    alice = signed_in(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post(f"/doc/{vault.pk}/delete")
    assert response.status_code == 200 and "is deleted" in response.content.decode()
    assert alice.get(f"/doc/{vault.pk}").status_code == 404
    assert not Chunk.objects.filter(document_id=vault.pk).exists(), "its passages left the index"
    assert Document.objects.filter(pk=vault.pk, deleted_at__isnull=False).exists(), "a soft delete, as the API's"


def test_changes_need_a_post(signed_in: SignIn, cast: Cast, vault: Document) -> None:
    alice = signed_in(cast.alice)
    assert {alice.get(f"/doc/{vault.pk}/{change}").status_code for change in CHANGES if change != "edit"} == {405}
