"""/team/collections: a team admin creates, renames, shares and deletes collections; no one else may."""

from __future__ import annotations

import pytest
from django.test import Client

from documents.models import Collection, CollectionMembership, Document
from permissions.models import Access, Group, Role
from tests.conftest import Cast, SignIn
from tests.factories import CollectionFactory, DocumentFactory, GroupFactory


@pytest.fixture
def readers(cast: Cast) -> Group:
    return GroupFactory.create(team=cast.alice.team, name="Readers")


def test_the_page_lists_every_collection_of_the_team_none_ones_included(signed_in: SignIn, cast: Cast) -> None:
    CollectionFactory.create(team=cast.alice.team, name="Board minutes", default_access=Access.NONE)
    CollectionFactory.create(team=cast.charlie.team, name="Their strategy")
    response = signed_in(cast.alice).get("/team/collections")
    html = response.content.decode()
    assert response.status_code == 200
    assert all(name in html for name in ("Handbook", "Private", "Board minutes")) and "Their strategy" not in html
    assert html.count("shared with 1<") == 2  # alice, a member of Handbook and of Private
    assert "nonce-" in response["Content-Security-Policy"]


def test_a_member_who_is_not_admin_gets_the_403_page(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.bob)
    for path in ("/team/collections", f"/team/collections/{cast.handbook.pk}", f"/team/collections/{cast.handbook.pk}/delete"):
        response = client.get(path)
        assert response.status_code == 403 and "Not allowed" in response.content.decode(), path
    assert client.post("/team/collections", {"name": "Mine", "default_access": "read"}).status_code == 403
    assert not Collection.objects.filter(name="Mine").exists()


def test_signing_in_comes_first(client: Client, cast: Cast) -> None:
    response = client.get("/team/collections")
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_another_teams_collection_is_the_404_page(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.charlie)
    assert client.get(f"/team/collections/{cast.private.pk}").status_code == 404
    response = client.post(f"/team/collections/{cast.private.pk}/delete")
    assert response.status_code == 404 and "Page not found" in response.content.decode()
    assert Collection.objects.get(pk=cast.private.pk).deleted_at is None


def test_creating_a_private_collection_makes_its_creator_a_member(signed_in: SignIn, cast: Cast) -> None:
    response = signed_in(cast.alice).post(
        "/team/collections", {"name": "Board", "description": "Minutes.", "default_access": "none"}
    )
    board = Collection.objects.get(name="Board")
    assert response.status_code == 302 and response["Location"] == f"/team/collections/{board.pk}"
    assert (board.default_access, board.description) == ("none", "Minutes.")
    assert CollectionMembership.objects.filter(collection=board, user=cast.alice, role=Role.READ_WRITE).exists()


def test_a_collection_without_a_name_is_refused_on_the_page(signed_in: SignIn, cast: Cast) -> None:
    response = signed_in(cast.alice).post("/team/collections", {"name": "", "default_access": "none"})
    assert response.status_code == 400 and "This field is required." in response.content.decode()


def test_renaming_and_opening_a_collection_to_the_team(signed_in: SignIn, cast: Cast) -> None:
    response = signed_in(cast.alice).post(
        f"/team/collections/{cast.private.pk}", {"name": "Engineering", "description": "", "default_access": "read"}
    )
    assert response.status_code == 302
    cast.private.refresh_from_db()
    assert (cast.private.name, cast.private.default_access) == ("Engineering", "read")


def test_sharing_with_a_group_then_changing_and_removing_it(signed_in: SignIn, cast: Cast, readers: Group) -> None:
    client = signed_in(cast.alice)
    share = f"/team/collections/{cast.private.pk}/share"
    assert client.post(share, {"grantee": f"group:{readers.pk}", "role": "read"}).status_code == 302
    page = client.get(f"/team/collections/{cast.private.pk}").content.decode()
    assert f'href="/team/groups/{readers.pk}">Readers</a>' in page
    client.post(share, {"grantee": f"group:{readers.pk}", "role": "read_write"})
    assert CollectionMembership.objects.get(collection=cast.private, group=readers).role == Role.READ_WRITE
    client.post(share, {"grantee": f"group:{readers.pk}", "remove": "1"})
    assert not CollectionMembership.objects.filter(collection=cast.private, group=readers).exists()


def test_sharing_with_a_person_of_the_team(signed_in: SignIn, cast: Cast) -> None:
    signed_in(cast.alice).post(f"/team/collections/{cast.private.pk}/share", {"grantee": f"user:{cast.bob.pk}", "role": "read"})
    assert CollectionMembership.objects.filter(collection=cast.private, user=cast.bob, role=Role.READ).exists()


def test_sharing_with_another_teams_group_or_person_is_the_404_page(signed_in: SignIn, cast: Cast) -> None:
    theirs = GroupFactory.create(team=cast.charlie.team)
    client = signed_in(cast.alice)
    for grantee in (f"group:{theirs.pk}", f"user:{cast.charlie.pk}"):
        assert client.post(f"/team/collections/{cast.private.pk}/share", {"grantee": grantee}).status_code == 404
    assert CollectionMembership.objects.filter(collection=cast.private).count() == 1  # alice's own


def test_the_delete_confirmation_says_what_happens_and_deletes_nothing(signed_in: SignIn, cast: Cast) -> None:
    DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    DocumentFactory.create(collection=cast.handbook, created_by=cast.bob, published_at=None)  # bob's draft: not counted
    response = signed_in(cast.alice).get(f"/team/collections/{cast.handbook.pk}/delete")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Every document in it is deleted with it: the 1 you can read, and any others in it" in html
    assert "An operator can restore the collection and its documents from the admin." in html
    assert Collection.objects.get(pk=cast.handbook.pk).deleted_at is None


def test_the_delete_confirmation_of_a_collection_with_nothing_readable_says_so_plainly(signed_in: SignIn, cast: Cast) -> None:
    html = signed_in(cast.alice).get(f"/team/collections/{cast.handbook.pk}/delete").content.decode()
    assert "there is none you can read" in html and "the 0 you can read" not in html


def test_confirming_deletes_the_collection_and_its_documents(signed_in: SignIn, cast: Cast) -> None:
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    response = signed_in(cast.alice).post(f"/team/collections/{cast.handbook.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/team/collections"
    assert Collection.objects.get(pk=cast.handbook.pk).deleted_at is not None
    assert Document.objects.get(pk=document.pk).deleted_at is not None
    page = signed_in(cast.alice).get("/team/collections").content.decode()
    assert "Deleted &quot;Handbook&quot; and the documents in it." in page
    assert f'href="/team/collections/{cast.handbook.pk}"' not in page
