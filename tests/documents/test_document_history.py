"""A document's history: written by the services, listed and diffed on its page, restorable, in the API; seen by its readers only."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from documents import services
from documents.models import Document, DocumentVersion
from permissions.models import TokenScope
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.conftest import ApiFor, Cast, SignIn
from tests.factories import DocumentFactory

Capture = Callable[..., Any]

FIRST = "# Deploying\n\nMerge after one approval.\n\nPromote the image.\n"
SECOND = "# Deploying\n\nMerge after two approvals.\n\nPromote the image.\n"


@pytest.fixture
def deploying(cast: Cast) -> Document:
    """Written by alice, its text changed by alice: two versions."""
    document = services.document_create(by=cast.alice, collection=cast.handbook, title="Deploying", text=FIRST, publish=True)
    return services.document_update(document=document, by=cast.alice, text=SECOND)


def entries(document: Document) -> list[tuple[int, str, str, str | None]]:
    rows = DocumentVersion.objects.filter(document=document).order_by("version", "created_at")
    return [(e.version, e.title, e.text, e.created_by.username if e.created_by else None) for e in rows]


def test_create_and_every_title_or_text_change_are_written_to_the_history(cast: Cast, deploying: Document) -> None:
    services.document_update(document=deploying, by=cast.bob, title="Deploying safely")
    services.document_update(document=deploying, by=cast.bob, tags=["ops"])  # tags are no part of the history
    services.document_update(document=deploying, by=cast.bob, text=SECOND)  # unchanged: nothing written
    assert entries(deploying) == [
        (1, "Deploying", FIRST, "alice"),
        (2, "Deploying", SECOND, "alice"),
        (2, "Deploying safely", SECOND, "bob"),
    ]


def test_the_page_lists_each_version_with_who_and_when(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    page = signed_in(cast.bob).get(f"/doc/{deploying.pk}").content.decode()
    history = page.split('id="history"')[1]
    assert history.count("<li>") == 2 and history.index("Version 2") < history.index("Version 1")
    assert "text changed" in history and "created" in history and "alice · " in history


def version_url(document: Document, version: int) -> str:
    entry = DocumentVersion.objects.filter(document=document, version=version).latest("created_at")
    return f"/doc/{document.pk}/versions/{entry.pk}"


def test_a_version_s_page_shows_what_changed_since_the_previous_one(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    page = signed_in(cast.bob).get(version_url(deploying, 2)).content.decode()
    assert '<li class="removed"><del>Merge after one approval.</del></li>' in page
    assert '<li class="added"><ins>Merge after two approvals.</ins></li>' in page
    assert '<li class="same">Promote the image.</li>' in page
    assert "1 line added, 1 removed" in page


def test_the_diff_shows_markup_as_text(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    services.document_update(document=deploying, by=cast.alice, text=SECOND + "<script>alert(1)</script>\n")
    page = signed_in(cast.alice).get(version_url(deploying, 3)).content.decode()
    assert '<li class="added"><ins>&lt;script&gt;alert(1)&lt;/script&gt;</ins></li>' in page


def test_a_title_change_shows_the_old_and_new_title(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    services.document_update(document=deploying, by=cast.alice, title="Deploying <safely>")
    page = signed_in(cast.alice).get(version_url(deploying, 2)).content.decode()
    assert "Title: <del>Deploying</del> → <ins>Deploying &lt;safely&gt;</ins>" in page and "The text did not change." in page


def test_restoring_a_version_makes_a_new_one_with_its_text_which_search_finds_again(
    signed_in: SignIn, cast: Cast, api_for: ApiFor, deploying: Document, django_capture_on_commit_callbacks: Capture
) -> None:
    alice = signed_in(cast.alice)
    url = version_url(deploying, 1)
    assert "Restore this version" in alice.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post(f"{url}/restore")
    deploying.refresh_from_db()
    assert (response.status_code, deploying.version, deploying.text) == (302, 3, FIRST)
    assert entries(deploying)[-1] == (3, "Deploying", FIRST, "alice")
    hits = api_for(cast.bob).post("rag.search", {"query": "one approval", "mode": "keyword"}).json()["data"]
    assert [hit["id"].split(":")[1] for hit in hits] == ["3"], "the passage of the new version"


def test_a_reader_may_see_the_history_but_not_restore_it(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    bob = signed_in(cast.bob)
    url = version_url(deploying, 1)
    assert "Restore this version" not in bob.get(url).content.decode()
    assert bob.post(f"{url}/restore").status_code == 403
    deploying.refresh_from_db()
    assert deploying.version == 2


def test_the_history_of_a_document_one_cannot_read_is_not_found(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    secret = services.document_create(
        by=cast.alice, collection=cast.private, title="Secret", text="The code is 4711.", publish=True
    )
    assert signed_in(cast.bob).get(version_url(secret, 1)).status_code == 404
    charlie = signed_in(cast.charlie)
    assert charlie.get(version_url(deploying, 1)).status_code == 404
    assert charlie.post(f"{version_url(deploying, 1)}/restore").status_code == 404


def test_an_entry_of_another_document_is_not_found_under_this_one(signed_in: SignIn, cast: Cast, deploying: Document) -> None:
    other = services.document_create(by=cast.alice, collection=cast.handbook, title="Other", text="x", publish=True)
    entry = DocumentVersion.objects.get(document=other)
    assert signed_in(cast.alice).get(f"/doc/{deploying.pk}/versions/{entry.pk}").status_code == 404


def test_the_api_lists_the_history_newest_first_and_gives_one_version_s_text(
    api_for: ApiFor, cast: Cast, deploying: Document
) -> None:
    api = api_for(cast.bob, TokenScope.READ)
    listed = api.post("documents.versions", {"id": str(deploying.pk)}).json()
    assert [(v["version"], v["createdBy"]) for v in listed["data"]] == [(2, str(cast.alice.pk)), (1, str(cast.alice.pk))]
    assert listed["pagination"]["total"] == 2 and "text" not in listed["data"][0]
    one = api.post("documents.version", {"id": str(deploying.pk), "version": 1}).json()["data"]
    assert (one["version"], one["title"], one["text"]) == (1, "Deploying", FIRST)


def test_the_api_answers_not_found_for_a_missing_version_or_an_unreadable_document(
    api_for: ApiFor, cast: Cast, deploying: Document
) -> None:
    assert api_for(cast.bob).post("documents.version", {"id": str(deploying.pk), "version": 9}).status_code == 404
    charlie = api_for(cast.charlie)
    assert charlie.post("documents.versions", {"id": str(deploying.pk)}).json()["error"] == "not_found"
    assert charlie.post("documents.version", {"id": str(deploying.pk), "version": 1}).status_code == 404


def test_versions_are_seen_exactly_by_those_who_read_the_document(api_for: ApiFor, db: None) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(
        7, teams=2, users=6, documents=16
    )
    world = (collections, group_members, coll_users, coll_groups, doc_users)
    answers = []
    for user in users[:3]:
        api = api_for(user, TokenScope.READ)
        seen = {doc.pk for doc in docs if api.post("documents.versions", {"id": str(doc.pk)}).status_code == 200}
        assert seen == {doc.pk for doc in docs if oracle_sees(user, doc, *world, include_archived=True)}, user
        answers.append(len(seen))
    assert 0 < sum(answers) < 3 * len(docs), "the matrix holds both readable and unreadable documents"


def test_the_migration_writes_every_existing_document_s_current_state_as_its_history(cast: Cast) -> None:
    edited = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Edited", text="v3", version=3)
    fresh = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Fresh", text="v1")
    DocumentVersion.objects.all().delete()
    migration = importlib.import_module("documents.migrations.0010_document_versions")
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKFILL)
    # Who wrote version 3 is not known; version 1 is its creator's.
    assert (entries(edited), entries(fresh)) == ([(3, "Edited", "v3", None)], [(1, "Fresh", "v1", "alice")])


def test_a_text_change_through_the_api_is_written_as_the_caller_s(api_for: ApiFor, cast: Cast, deploying: Document) -> None:
    api_for(cast.alice).post("documents.update", {"id": str(deploying.pk), "text": "Ship it."})
    assert entries(deploying)[-1] == (3, "Deploying", "Ship it.", "alice")
