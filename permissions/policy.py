"""Role decisions. Querysets filter what is visible; these decide what a viewer may change."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from permissions.models import Access, Role, TeamRole

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from permissions.models import User


# What the policy reads of a documents.Collection and a documents.Document: permissions may not import documents.
class Memberships(Protocol):
    def filter(self, *args: Any, **kwargs: Any) -> QuerySet[Any]: ...


class CollectionLike(Protocol):
    @property
    def team_id(self) -> uuid.UUID: ...
    @property
    def default_access(self) -> str: ...
    @property
    def memberships(self) -> Memberships: ...


class DocumentLike(Protocol):
    @property
    def created_by_id(self) -> uuid.UUID | None: ...
    @property
    def published_at(self) -> datetime | None: ...
    @property
    def collection(self) -> CollectionLike: ...
    @property
    def memberships(self) -> Memberships: ...


def can_write(user: User) -> bool:
    """Whether the user's team role lets them change anything at all: a read-only member reads and changes
    nothing (no document, collection, tag, import, feedback, kept conversation or API token), whatever the
    collections and memberships grant. The API treats them as a read-scoped token (authentication.may_write)."""
    return user.role != TeamRole.READ_ONLY


def can_manage_collections(user: User) -> bool:
    return user.team_id is not None and user.is_team_admin


def can_manage_groups(user: User) -> bool:
    """Team admins create, rename and delete their team's groups and choose their members."""
    return user.team_id is not None and user.is_team_admin


def can_manage_members(user: User) -> bool:
    """Team admins invite people, change roles and deactivate accounts, in their own team only."""
    return user.team_id is not None and user.is_team_admin


def can_see_team_jobs(user: User) -> bool:
    """Team admins follow the imports of their team into the collections they may read; others see only
    the jobs they started."""
    return user.team_id is not None and user.is_team_admin


def can_write_collection(user: User, collection: CollectionLike) -> bool:
    """Team admins, a read-write team default, or a read-write membership (direct or via a group); never a
    read-only member."""
    if user.team_id != collection.team_id or not can_write(user):
        return False
    if user.is_team_admin or collection.default_access == Access.READ_WRITE:
        return True
    return (
        collection.memberships.filter(role=Role.READ_WRITE).filter(user_id=user.pk).exists()
        or collection.memberships.filter(role=Role.READ_WRITE, group__memberships__user_id=user.pk).exists()
    )


def can_write_document(user: User, document: DocumentLike) -> bool:
    """Callers pass a document already known to be visible to `user`."""
    if not can_write(user):
        return False
    if document.created_by_id == user.pk and document.published_at is None:
        return True
    if can_write_collection(user, document.collection):
        return True
    return document.memberships.filter(user_id=user.pk, role=Role.READ_WRITE).exists()
