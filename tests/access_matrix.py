"""A random permission matrix and an oracle for who sees what, written independently of the ORM."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

from django.utils import timezone

from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
)
from permissions.models import Access, Group, GroupMembership, Role, Team, User


def build_random_matrix(seed: int, *, teams: int = 3, users: int = 36, documents: int = 360):
    """Random teams, groups, collections, memberships and documents; returns the plain-Python world."""
    rng = random.Random(seed)
    now = timezone.now()
    team_rows = [Team.objects.create(name=f"T{i}") for i in range(teams)]
    user_rows = User.objects.bulk_create([User(username=f"u{seed}-{i}", team=rng.choice(team_rows)) for i in range(users)])
    group_rows = [Group.objects.create(team=t, name=f"G{j}") for t in team_rows for j in range(2)]
    group_members: dict[uuid.UUID, set[uuid.UUID]] = {g.pk: set() for g in group_rows}
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
    coll_users: dict[uuid.UUID, set[uuid.UUID]] = {c.pk: set() for c in collections}
    coll_groups: dict[uuid.UUID, set[uuid.UUID]] = {c.pk: set() for c in collections}
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
                team_id=c.team_id,
                collection=c,
                title="d",
                created_by=rng.choice(user_rows),
                published_at=now if rng.random() < 0.75 else None,
                archived_at=now - timedelta(days=1) if rng.random() < 0.15 else None,
                deleted_at=now if rng.random() < 0.1 else None,
            )
        )
    Document.objects.bulk_create(docs)
    doc_users: dict[uuid.UUID, set[uuid.UUID]] = {d.pk: set() for d in docs}
    for d in docs:
        for user in rng.sample(user_rows, 2) if rng.random() < 0.3 else []:
            DocumentMembership.objects.create(document=d, user=user)
            doc_users[d.pk].add(user.pk)
    # A deleted collection whose documents are not all deleted (one created by an import still running, or
    # restored alone in the admin): it gives no access, but a document shared with someone stays theirs.
    collections[0].deleted_at = now
    Collection.objects.filter(pk=collections[0].pk).update(deleted_at=now)
    return user_rows, docs, {c.pk: c for c in collections}, group_members, coll_users, coll_groups, doc_users


def oracle_sees(user, doc, collections, group_members, coll_users, coll_groups, doc_users, include_archived) -> bool:
    """DESIGN.md's rule, written independently of the ORM."""
    collection = collections[doc.collection_id]
    user_groups = {g for g, members in group_members.items() if user.pk in members}
    through_collection = collection.deleted_at is None and (
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


def build_random_sources(seed: int, users: list[User], collections: dict[uuid.UUID, Collection], docs: list[Document]):
    """Sources on the matrix: some users made team admins, each source owned by a user of its collection's team,
    with a distinctive name, configuration, secret and sync error, and some of the documents as what it wrote.

    Returns the sources and, for each, the strings that must reach nobody but its owner and team admins.
    """
    from connectors.models import SourceSync, SyncedItem, SyncedSource, SyncStage
    from connectors.secrets import encrypt_secrets
    from permissions.models import TeamRole

    rng = random.Random(seed * 7 + 1)
    for user in users:
        if rng.random() < 0.3:
            user.role = TeamRole.ADMIN
            User.objects.filter(pk=user.pk).update(role=TeamRole.ADMIN)
    sources: list[SyncedSource] = []
    private: dict[uuid.UUID, list[str]] = {}
    for n, collection in enumerate(collections.values()):
        owners = [u for u in users if u.team_id == collection.team_id]
        if not owners:
            continue
        tag = f"{seed}x{n}q"
        source = SyncedSource.objects.create(
            team_id=collection.team_id,
            owner=rng.choice(owners),
            name=f"source-name-{tag}",
            kind="folder",
            config={"path": f"/srv/config-path-{tag}", "flavour": "files"},
            secrets=encrypt_secrets({"token": f"secret-token-{tag}"}),
            collection=collection,
        )
        sync = SourceSync.objects.create(
            source=source, stage=SyncStage.DONE, failed=1, errors=[{"key": f"item-key-{tag}", "message": f"item-error-{tag}"}]
        )
        SyncedSource.objects.filter(pk=source.pk).update(last_sync=sync)
        for i, doc in enumerate(d for d in docs if d.collection_id == collection.pk):
            SyncedItem.objects.create(source=source, key=f"k{i}", version="v", document=doc)
        sources.append(source)
        private[source.pk] = [source.name, f"config-path-{tag}", f"item-key-{tag}", f"item-error-{tag}"]
    return sources, private


def oracle_sees_source(user: User, source) -> bool:
    """A source's name, configuration and errors: its owner's and its team admins', nobody else's."""
    return source.team_id == user.team_id and (source.owner_id == user.pk or user.role == "admin")
