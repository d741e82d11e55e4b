"""Document.objects.visible_to: the cast, then a random permission matrix against a Python oracle."""
from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from documents.models import Collection, CollectionMembership, Document, DocumentMembership
from permissions.models import Access, Group, GroupMembership, Role, Team, User
from tests.factories import (
    CollectionFactory,
    CollectionMembershipFactory,
    DocumentFactory,
    DocumentMembershipFactory,
    GroupFactory,
    GroupMembershipFactory,
)


def visible_ids(user, **kwargs) -> set:
    return set(Document.objects.visible_to(user, **kwargs).values_list("id", flat=True))


def test_published_documents_in_a_team_readable_collection_are_visible_to_the_team(cast):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice)
    assert doc.id in visible_ids(cast.alice)
    assert doc.id in visible_ids(cast.bob)
    assert doc.id not in visible_ids(cast.charlie)


def test_drafts_are_visible_only_to_their_creator(cast):
    draft = DocumentFactory(collection=cast.handbook, created_by=cast.alice, published_at=None)
    assert draft.id in visible_ids(cast.alice)
    assert draft.id not in visible_ids(cast.bob)


def test_archived_documents_are_hidden_unless_asked_for(cast):
    doc = DocumentFactory(collection=cast.handbook, archived_at=timezone.now())
    assert doc.id not in visible_ids(cast.bob)
    assert doc.id in visible_ids(cast.bob, include_archived=True)


def test_deleted_documents_are_never_visible(cast):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, deleted_at=timezone.now())
    assert doc.id not in visible_ids(cast.alice, include_archived=True)


def test_private_collections_are_visible_only_to_members(cast):
    doc = DocumentFactory(collection=cast.private)
    assert doc.id in visible_ids(cast.alice)
    assert doc.id not in visible_ids(cast.bob)


def test_group_membership_grants_collection_access(cast):
    doc = DocumentFactory(collection=cast.private)
    group = GroupFactory(team=cast.bob.team)
    CollectionMembershipFactory(collection=cast.private, group=group)
    assert doc.id not in visible_ids(cast.bob)
    GroupMembershipFactory(group=group, user=cast.bob)
    assert doc.id in visible_ids(cast.bob)


def test_document_membership_grants_one_document(cast):
    shared, other = DocumentFactory(collection=cast.private), DocumentFactory(collection=cast.private)
    DocumentMembershipFactory(document=shared, user=cast.bob)
    assert visible_ids(cast.bob) & {shared.id, other.id} == {shared.id}


def test_other_teams_never_see_documents_even_with_a_membership(cast):
    doc = DocumentFactory(collection=cast.handbook)
    DocumentMembershipFactory(document=doc, user=cast.charlie)
    assert doc.id not in visible_ids(cast.charlie)


def test_a_user_without_a_team_sees_nothing(cast):
    DocumentFactory(collection=cast.handbook)
    loner = User.objects.create(username="operator")
    assert visible_ids(loner) == set()


def test_visible_to_returns_each_document_once_whatever_the_number_of_grants(cast):
    doc = DocumentFactory(collection=cast.private)
    group = GroupFactory(team=cast.alice.team)
    GroupMembershipFactory(group=group, user=cast.alice)
    CollectionMembershipFactory(collection=cast.private, group=group)
    DocumentMembershipFactory(document=doc, user=cast.alice)
    assert Document.objects.visible_to(cast.alice).filter(id=doc.id).count() == 1


def build_random_matrix(seed: int, *, teams: int = 3, users: int = 36, documents: int = 360):
    """Random teams, groups, collections, memberships and documents; returns the plain-Python world."""
    rng = random.Random(seed)
    now = timezone.now()
    team_rows = [Team.objects.create(name=f"T{i}") for i in range(teams)]
    user_rows = User.objects.bulk_create(
        [User(username=f"u{seed}-{i}", team=rng.choice(team_rows)) for i in range(users)]
    )
    group_rows = [Group.objects.create(team=t, name=f"G{j}") for t in team_rows for j in range(2)]
    group_members = {g.pk: set() for g in group_rows}
    for user in user_rows:
        for group in group_rows:
            if group.team_id == user.team_id and rng.random() < 0.4:
                GroupMembership.objects.create(group=group, user=user)
                group_members[group.pk].add(user.pk)
    collections = [
        Collection.objects.create(team=t, name=f"C{j}", default_access=rng.choice(list(Access.values)))
        for t in team_rows
        for j in range(4)
    ]
    coll_users, coll_groups = {c.pk: set() for c in collections}, {c.pk: set() for c in collections}
    for c in collections:
        for user in rng.sample(user_rows, 6):  # may pick users of other teams: memberships must not leak
            CollectionMembership.objects.create(collection=c, user=user, role=rng.choice(list(Role.values)))
            coll_users[c.pk].add(user.pk)
        for group in rng.sample(group_rows, 2):
            CollectionMembership.objects.create(collection=c, group=group)
            coll_groups[c.pk].add(group.pk)
    docs = []
    for _ in range(documents):
        c = rng.choice(collections)
        docs.append(
            Document(
                team_id=c.team_id, collection=c, title="d", created_by=rng.choice(user_rows),
                published_at=now if rng.random() < 0.75 else None,
                archived_at=now - timedelta(days=1) if rng.random() < 0.15 else None,
                deleted_at=now if rng.random() < 0.1 else None,
            )
        )
    Document.objects.bulk_create(docs)
    doc_users = {d.pk: set() for d in docs}
    for d in docs:
        for user in rng.sample(user_rows, 2) if rng.random() < 0.3 else []:
            DocumentMembership.objects.create(document=d, user=user)
            doc_users[d.pk].add(user.pk)
    return user_rows, docs, {c.pk: c for c in collections}, group_members, coll_users, coll_groups, doc_users


def oracle_sees(user, doc, collections, group_members, coll_users, coll_groups, doc_users, include_archived) -> bool:
    """DESIGN.md's rule, written independently of the ORM."""
    collection = collections[doc.collection_id]
    user_groups = {g for g, members in group_members.items() if user.pk in members}
    through_collection = (
        collection.default_access in (Access.READ, Access.READ_WRITE)
        or user.pk in coll_users[collection.pk]
        or bool(user_groups & coll_groups[collection.pk])
    )
    return (
        doc.team_id == user.team_id
        and doc.deleted_at is None
        and (doc.published_at is not None or doc.created_by_id == user.pk)
        and (include_archived or doc.archived_at is None)
        and (through_collection or user.pk in doc_users[doc.pk])
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_visible_to_matches_an_independent_oracle_on_a_random_permission_matrix(db, seed):
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(seed)
    checked_visible = 0
    for include_archived in (False, True):
        for user in users:
            expected = {
                d.pk for d in docs
                if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, include_archived)
            }
            assert visible_ids(user, include_archived=include_archived) == expected, user.username
            checked_visible += len(expected)
    # The matrix must exercise both outcomes, or the comparison proves little.
    assert 0 < checked_visible < len(users) * len(docs) * 2
