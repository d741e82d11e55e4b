"""Writes for collections, documents and memberships. Callers check permissions first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from config.errors import CollectionNotEmpty
from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
    DocumentVersion,
)
from documents.signals import bulk_changes, document_deleted, document_saved
from documents.tags import normalise_tags
from permissions.models import Access, Group, Role, User


@transaction.atomic
def collection_create(*, by: User, name: str, description: str = "", default_access: str = Access.READ_WRITE) -> Collection:
    """Create a collection; its creator is a read-write member, so a `none` collection is usable and shareable at once."""
    # Callers check can_manage_collections first, which requires a team.
    assert by.team_id is not None, "only a user with a team can create a collection"
    collection = Collection(team_id=by.team_id, name=name, description=description, default_access=default_access, created_by=by)
    collection.full_clean()
    collection.save()
    CollectionMembership.objects.create(collection=collection, user=by, role=Role.READ_WRITE)
    return collection


@transaction.atomic
def collection_update(
    *, collection: Collection, name: str | None = None, description: str | None = None, default_access: str | None = None
) -> Collection:
    """Rename, describe or change the team's default access (None: unchanged). Access follows at once:
    every reader goes through `visible_to`, and the save gives the team a new answer-cache token."""
    collection = Collection.objects.select_for_update().get(pk=collection.pk)
    changed = {
        field: value
        for field, value in (("name", name), ("description", description), ("default_access", default_access))
        if value is not None and value != getattr(collection, field)
    }
    if changed:
        for field, value in changed.items():
            setattr(collection, field, value)
        collection.full_clean()
        collection.save(update_fields=list(changed))
    return collection


@transaction.atomic
def collection_delete(*, collection: Collection, confirm: bool = False) -> Collection:
    """Delete a collection. One holding documents (not already deleted) is refused unless `confirm`.

    Its documents are deleted as `document_delete` deletes one: out of every list, search and answer
    at once, their passages leaving the index once the delete commits. The collection itself is
    only marked deleted, out of sight with its grants, so an operator can restore it and them
    (`collection_restore`); nothing is erased.
    """
    collection = Collection.objects.select_for_update().get(pk=collection.pk)
    live = Document.objects.filter(collection=collection, deleted_at__isnull=True)
    if live.exists() and not confirm:
        raise CollectionNotEmpty(
            f'The collection "{collection.name}" still holds documents. Send "confirm": true to delete them with it '
            "(an operator can restore them from the admin)."
        )
    collection.deleted_at = timezone.now()
    collection.save(update_fields=["deleted_at"])
    documents_delete(documents=live, at=collection.deleted_at)
    return collection


@transaction.atomic
def collection_restore(*, collection: Collection) -> Collection:
    """Undo collection_delete: the collection comes back with the documents deleted with it (those deleted
    before it stay deleted), and they are indexed again."""
    deleted_at = collection.deleted_at
    if deleted_at is None:
        return collection
    collection.deleted_at = None
    collection.save(update_fields=["deleted_at"])
    for document in Document.objects.filter(collection=collection, deleted_at__gte=deleted_at):
        document_restore(document=document)
    return collection


@transaction.atomic
def collection_membership_set(
    *, collection: Collection, user: User | None = None, group: Group | None = None, role: str = Role.READ
) -> CollectionMembership:
    lookup = {"user": user} if user is not None else {"group": group}
    membership, _ = CollectionMembership.objects.update_or_create(collection=collection, **lookup, defaults={"role": role})
    return membership


@transaction.atomic
def collection_membership_remove(*, collection: Collection, user: User | None = None, group: Group | None = None) -> None:
    lookup = {"user": user} if user is not None else {"group": group}
    CollectionMembership.objects.filter(collection=collection, **lookup).delete()


@transaction.atomic
def document_create(
    *,
    by: User | None,
    collection: Collection,
    title: str,
    text: str = "",
    publish: bool = False,
    tags: Sequence[str] = (),
    origin: str = "",
) -> Document:
    now = timezone.now()
    document = Document(
        team_id=collection.team_id,
        collection=collection,
        title=title,
        text=text,
        origin=origin,
        tags=list(tags),  # normalised by full_clean (Document.clean)
        created_by=by,
        created_at=now,
        updated_at=now,
        published_at=now if publish else None,
    )
    document.full_clean()
    document.save()
    _version_record(document=document, by=by)
    document_saved.send(sender=Document, document_id=document.pk, content_changed=True)
    return document


def _version_record(*, document: Document, by: User | None) -> DocumentVersion:
    """The document's title and text as they now are, in its history."""
    return DocumentVersion.objects.create(
        document=document,
        version=document.version,
        title=document.title,
        text=document.text,
        created_by=by,
        created_at=document.updated_at,
    )


@transaction.atomic
def document_update(
    *,
    document: Document,
    by: User | None = None,
    title: str | None = None,
    text: str | None = None,
    publish: bool = False,
    tags: Sequence[str] | None = None,
    origin: str | None = None,
) -> Document:
    """Update title, text, tags and/or origin (None: unchanged; tags replace the old ones); a text change bumps the version (and so reindexes).

    A title or text change is written to the history as `by`'s.
    """
    # Lock the row so two concurrent edits cannot both read version n and write n+1.
    document = Document.objects.select_for_update().get(pk=document.pk)
    title_changed = content_changed = unindexed_changed = False
    if origin is not None and origin != document.origin:
        document.origin = origin
        unindexed_changed = True  # like tags: read from the documents table, nothing to reindex
    if tags is not None and normalise_tags(tags) != document.tags:
        document.tags = normalise_tags(tags)
        # Search filters by tag through the documents table: nothing to reindex.
        unindexed_changed = True
    if title is not None and title != document.title:
        document.title = title
        title_changed = True
    if text is not None and text != document.text:
        document.text = text
        document.version += 1
        content_changed = True
    published_now = publish and document.published_at is None
    if published_now:
        document.published_at = timezone.now()
    if not (title_changed or content_changed or published_now or unindexed_changed):
        return document
    document.updated_at = timezone.now()
    document.full_clean()
    document.save()
    if title_changed or content_changed:
        _version_record(document=document, by=by)
    if title_changed or content_changed or published_now:
        document_saved.send(sender=Document, document_id=document.pk, content_changed=content_changed or published_now)
    return document


@transaction.atomic
def document_move(*, document: Document, collection: Collection) -> Document:
    """Move a document to another collection of its team (Document.clean refuses another team's).

    Nothing is reindexed: the index's copies of the collection follow the document by trigger (rag
    migrations 0016, 0017, 0019; Milvus's through the outbox, 0023), and who may read it is decided through
    the documents table.
    """
    document = Document.objects.select_for_update().get(pk=document.pk)
    if document.collection_id == collection.pk:
        return document
    document.collection = collection
    document.updated_at = timezone.now()
    document.full_clean()
    document.save(update_fields=["collection", "updated_at"])
    return document


def document_revert(*, document: Document, to: DocumentVersion, by: User) -> Document:
    """Make an earlier title and text the document's again: a change like any other, so a new version when the text differs."""
    assert to.document_id == document.pk, "a document is reverted to an entry of its own history"
    return document_update(document=document, by=by, title=to.title, text=to.text)


def document_publish(*, document: Document) -> Document:
    return document_update(document=document, publish=True)


@transaction.atomic
def document_archive(*, document: Document) -> Document:
    # Archived chunks stay in the index (archived documents may be asked for); search filters them.
    if document.archived_at is None:
        document.archived_at = timezone.now()
        document.save(update_fields=["archived_at"])
    return document


@transaction.atomic
def document_unarchive(*, document: Document) -> Document:
    if document.archived_at is not None:
        document.archived_at = None
        document.save(update_fields=["archived_at"])
    return document


@transaction.atomic
def document_delete(*, document: Document) -> Document:
    if document.deleted_at is None:
        document.deleted_at = timezone.now()
        document.save(update_fields=["deleted_at"])
        document_deleted.send(sender=Document, document_id=document.pk)
    return document


@transaction.atomic
def documents_delete(*, documents: QuerySet[Document], at: datetime | None = None) -> int:
    """`document_delete` for many documents in one update (a collection's); how many were deleted."""
    ids = list(documents.filter(deleted_at__isnull=True).select_for_update().values_list("pk", flat=True))
    Document.objects.filter(pk__in=ids).update(deleted_at=at or timezone.now())
    with bulk_changes():  # a collection's documents: their removal does not hold up an edit
        for document_id in ids:
            document_deleted.send(sender=Document, document_id=document_id)
    return len(ids)


@transaction.atomic
def document_restore(*, document: Document) -> Document:
    """Undo document_delete; the document is indexed again, as its passages went with the delete."""
    if document.deleted_at is not None:
        document.deleted_at = None
        document.save(update_fields=["deleted_at"])
        document_saved.send(sender=Document, document_id=document.pk, content_changed=True)
    return document


@transaction.atomic
def document_membership_set(*, document: Document, user: User, role: str = Role.READ) -> DocumentMembership:
    membership, _ = DocumentMembership.objects.update_or_create(document=document, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def document_membership_remove(*, document: Document, user: User) -> None:
    DocumentMembership.objects.filter(document=document, user=user).delete()
