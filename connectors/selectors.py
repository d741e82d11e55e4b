"""Reads of sources, each taking the viewer: a source is seen by its owner and its team's admins only."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from config.errors import NotFound
from connectors.models import SourceSync, SyncedSource
from connectors.secrets import SecretsUnreadable, decrypt_secrets
from connectors.sync import sync_refresh
from permissions.models import User


def source_list(*, user: User) -> QuerySet[SyncedSource]:
    return SyncedSource.objects.visible_to(user).select_related("collection", "owner", "last_sync").order_by("name", "id")


def source_get(*, user: User, source_id: uuid.UUID) -> SyncedSource:
    """A source the user may see; NotFound for one that is missing and one of someone else, alike."""
    source = source_list(user=user).filter(pk=source_id).first()
    if source is None:
        raise NotFound("Source not found.")
    return source


def source_syncs(*, user: User, source: SyncedSource) -> QuerySet[SourceSync]:
    """The source's syncs, newest first (the caller got `source` through source_get)."""
    return SourceSync.objects.filter(source__in=source_list(user=user).filter(pk=source.pk)).order_by("-created_at")


def source_with_progress(source: SyncedSource) -> SyncedSource:
    """The source with its latest sync refreshed (indexing done?) and how far the index has come with it."""
    latest = SourceSync.objects.filter(source=source).order_by("-created_at").first()
    source.current_sync = sync_refresh(latest) if latest is not None else None  # type: ignore[attr-defined]
    return source


def secret_names(source: SyncedSource) -> list[str]:
    """Which secrets are set (their names, never their values)."""
    try:
        return sorted(decrypt_secrets(source.secrets))
    except SecretsUnreadable:
        return []
