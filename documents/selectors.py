"""Reads that take the viewer. Every path to a document starts from `visible_to`."""

from __future__ import annotations

import uuid

from config.errors import NotFound
from documents.models import Collection, Document, DocumentQuerySet
from permissions.models import User
from permissions.policy import can_manage_collections


def document_get(*, user: User, document_id: uuid.UUID, include_archived: bool = True) -> Document:
    document = (
        Document.objects.visible_to(user, include_archived=include_archived)
        .select_related("collection")
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise NotFound("Document not found.")
    return document


def document_list(*, user: User, collection_id: uuid.UUID | None = None, archived: bool = False) -> DocumentQuerySet:
    qs = Document.objects.visible_to(user, include_archived=archived)
    if archived:
        qs = qs.filter(archived_at__isnull=False)
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
        qs = qs.filter(collection_id=collection_id)
    return qs.order_by("-updated_at", "id")


def collection_get(*, user: User, collection_id: uuid.UUID) -> Collection:
    collection = Collection.objects.visible_to(user).filter(pk=collection_id).first()
    if collection is None:
        raise NotFound("Collection not found.")
    return collection


def collection_get_to_change(*, user: User, collection_id: uuid.UUID) -> Collection:
    """A collection the user may read, or any of their team's when they are a team admin (who may add to and share
    every collection, `none` ones included, without reading its documents); NotFound otherwise."""
    team_id = user.team_id
    if team_id is not None and can_manage_collections(user):
        collections = Collection.objects.filter(team_id=team_id)
    else:
        collections = Collection.objects.visible_to(user)
    collection = collections.filter(pk=collection_id).first()
    if collection is None:
        raise NotFound("Collection not found.")
    return collection


def collection_list(*, user: User):
    return Collection.objects.visible_to(user).order_by("name", "id")


def team_member_get(*, user: User, user_id: uuid.UUID) -> User:
    member = User.objects.filter(team_id=user.team_id, pk=user_id, is_active=True).first() if user.team_id else None
    if member is None:
        raise NotFound("User not found.")
    return member
