"""Document.objects.visible_to: the cast, then a random permission matrix against a Python oracle."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from documents.models import (
    Document,
)
from permissions.models import User
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.conftest import Cast
from tests.factories import (
    CollectionMembershipFactory,
    DocumentFactory,
    DocumentMembershipFactory,
    GroupFactory,
    GroupMembershipFactory,
)


def visible_ids(user: User, *, include_archived: bool = False) -> set[uuid.UUID]:
    return set(Document.objects.visible_to(user, include_archived=include_archived).values_list("id", flat=True))


def test_published_documents_in_a_team_readable_collection_are_visible_to_the_team(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice)
    assert doc.id in visible_ids(cast.alice)
    assert doc.id in visible_ids(cast.bob)
    assert doc.id not in visible_ids(cast.charlie)


def test_drafts_are_visible_only_to_their_creator(cast: Cast) -> None:
    draft = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, published_at=None)
    assert draft.id in visible_ids(cast.alice)
    assert draft.id not in visible_ids(cast.bob)


def test_archived_documents_are_hidden_unless_asked_for(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, archived_at=timezone.now())
    assert doc.id not in visible_ids(cast.bob)
    assert doc.id in visible_ids(cast.bob, include_archived=True)


def test_deleted_documents_are_never_visible(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, deleted_at=timezone.now())
    assert doc.id not in visible_ids(cast.alice, include_archived=True)


def test_private_collections_are_visible_only_to_members(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.private)
    assert doc.id in visible_ids(cast.alice)
    assert doc.id not in visible_ids(cast.bob)


def test_group_membership_grants_collection_access(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.private)
    group = GroupFactory.create(team=cast.bob.team)
    CollectionMembershipFactory.create(collection=cast.private, group=group)
    assert doc.id not in visible_ids(cast.bob)
    GroupMembershipFactory.create(group=group, user=cast.bob)
    assert doc.id in visible_ids(cast.bob)


def test_document_membership_grants_one_document(cast: Cast) -> None:
    shared, other = DocumentFactory.create(collection=cast.private), DocumentFactory.create(collection=cast.private)
    DocumentMembershipFactory.create(document=shared, user=cast.bob)
    assert visible_ids(cast.bob) & {shared.id, other.id} == {shared.id}


def test_other_teams_never_see_documents_even_with_a_membership(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook)
    DocumentMembershipFactory.create(document=doc, user=cast.charlie)
    assert doc.id not in visible_ids(cast.charlie)


def test_a_user_without_a_team_sees_nothing(cast: Cast) -> None:
    DocumentFactory.create(collection=cast.handbook)
    loner = User.objects.create(username="operator")
    assert visible_ids(loner) == set()


def test_visible_to_returns_each_document_once_whatever_the_number_of_grants(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.private)
    group = GroupFactory.create(team=cast.alice.team)
    GroupMembershipFactory.create(group=group, user=cast.alice)
    CollectionMembershipFactory.create(collection=cast.private, group=group)
    DocumentMembershipFactory.create(document=doc, user=cast.alice)
    assert Document.objects.visible_to(cast.alice).filter(id=doc.id).count() == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_visible_to_matches_an_independent_oracle_on_a_random_permission_matrix(db: None, seed: int) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(seed)
    checked_visible = 0
    for include_archived in (False, True):
        for user in users:
            expected = {
                d.pk
                for d in docs
                if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, include_archived)
            }
            assert visible_ids(user, include_archived=include_archived) == expected, user.username
            checked_visible += len(expected)
    # The matrix must exercise both outcomes, or the comparison proves little.
    assert 0 < checked_visible < len(users) * len(docs) * 2


def each_way_ids(user: User) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    through_collection, only_shared = Document.objects.visible_to_each_way(user)
    return sorted(through_collection.values_list("id", flat=True)), sorted(only_shared.values_list("id", flat=True))


def test_each_way_a_document_visible_both_ways_comes_once_through_its_collection(cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.private)
    DocumentMembershipFactory.create(document=doc, user=cast.alice)
    shared_with_bob = DocumentFactory.create(collection=cast.private)
    DocumentMembershipFactory.create(document=shared_with_bob, user=cast.bob)
    assert each_way_ids(cast.alice) == (sorted([doc.pk, shared_with_bob.pk]), [])
    assert each_way_ids(cast.bob) == ([], [shared_with_bob.pk])
    assert each_way_ids(cast.charlie) == ([], [])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_two_ways_are_disjoint_and_their_union_is_visible_to(db: None, seed: int) -> None:
    """Search reads the visible set as the UNION ALL of the two ways: no document twice, none missing."""
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(seed)
    shared_only_seen = 0
    for user in users:
        through_collection, only_shared = each_way_ids(user)
        assert not set(through_collection) & set(only_shared), user.username
        assert sorted(through_collection + only_shared) == sorted(visible_ids(user)), user.username
        shared_only_seen += len(only_shared)
    assert shared_only_seen > 0, "the matrix must share some document outside a readable collection"
