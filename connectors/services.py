"""Writes for sources: create, change, pause, resume, delete, upload a ZIP, ask for a sync. Callers check who may."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from config.errors import Forbidden, StorageUnavailable, ValidationFailed
from connectors import tasks
from connectors.base import SourceError
from connectors.kinds import connector_class
from connectors.models import SourceState, SourceSync, SyncedSource, SyncTrigger
from connectors.secrets import SecretsUnreadable, decrypt_secrets, encrypt_secrets
from connectors.sync import sync_create
from documents.models import Collection, import_storage, storage_errors
from permissions.models import User
from permissions.policy import can_write, can_write_collection

logger = logging.getLogger("connectors")

MAX_INTERVAL_MINUTES = 60 * 24 * 30


def _check_collection(owner: User, collection: Collection) -> None:
    if collection.team_id != owner.team_id or collection.deleted_at is not None:
        raise ValidationFailed("collectionId: no such collection.")
    if not can_write(owner) or not can_write_collection(owner, collection):
        raise Forbidden("A source writes only into a collection its owner can write, and you cannot write this one.")


def _validated(kind: str, config: Mapping[str, Any], secrets: Mapping[str, str], archive: str = "") -> None:
    """The kind's own check of its configuration; its message becomes a 400."""
    full = dict(config)
    if "archive" in full:
        raise ValidationFailed("config.archive: set by uploading a ZIP (sources.upload), not in the configuration.")
    if archive:
        full["archive"] = archive
    try:
        connector_class(kind).from_config(full, secrets)
    except SourceError as exc:
        raise ValidationFailed(f"config: {exc.message}") from exc


def _check_interval(minutes: int) -> None:
    if not 0 <= minutes <= MAX_INTERVAL_MINUTES:
        raise ValidationFailed(f"intervalMinutes: between 0 (only when asked) and {MAX_INTERVAL_MINUTES}.")


def _clean_secrets(secrets: Mapping[str, Any]) -> dict[str, str]:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in secrets.items()):
        raise ValidationFailed("secrets: an object of strings.")
    return {k: v for k, v in secrets.items() if v != ""}


def _name_free(team_id: Any, name: str, source: SyncedSource | None = None) -> None:
    taken = SyncedSource.objects.filter(team_id=team_id, name__iexact=name)
    if source is not None:
        taken = taken.exclude(pk=source.pk)
    if taken.exists():
        raise ValidationFailed(f"name: the team already has a source named {name!r}.")


@transaction.atomic
def source_create(
    *,
    by: User,
    name: str,
    kind: str,
    collection: Collection,
    config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None,
    interval_minutes: int = 60,
    publish: bool = True,
    sync: bool = True,
) -> SyncedSource:
    """A new active source owned by `by`; its first sync is queued at once (`sync`) unless it waits for an upload."""
    assert by.team_id is not None, "only a user with a team owns a source"
    name = name.strip()
    _check_collection(by, collection)
    _check_interval(interval_minutes)
    _name_free(by.team_id, name)
    clean_secrets = _clean_secrets(secrets or {})
    _validated(kind, config or {}, clean_secrets)
    now = timezone.now()
    source = SyncedSource(
        team_id=by.team_id,
        owner=by,
        name=name,
        kind=kind,
        config=dict(config or {}),
        secrets=encrypt_secrets(clean_secrets),
        collection=collection,
        publish=publish,
        interval_minutes=interval_minutes,
        created_at=now,
        updated_at=now,
        next_sync_at=now + timedelta(minutes=interval_minutes) if interval_minutes else None,
    )
    source.full_clean()
    source.save()
    if sync and kind != "zip":
        source_sync_request(source=source, trigger=SyncTrigger.MANUAL)
    return source


@transaction.atomic
def source_update(
    *,
    source: SyncedSource,
    by: User,
    name: str | None = None,
    collection: Collection | None = None,
    config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None,
    interval_minutes: int | None = None,
    publish: bool | None = None,
) -> SyncedSource:
    """Change what is given (None: unchanged). `secrets` are merged: a name with "" removes that secret.

    A team admin who edits a source whose owner left the team (or was deactivated) becomes its owner.
    """
    source = SyncedSource.objects.select_for_update().get(pk=source.pk)
    owner = source.owner
    if owner is None or not owner.is_active or owner.team_id != source.team_id:
        source.owner = owner = by
    if name is not None and name.strip() != source.name:
        _name_free(source.team_id, name.strip(), source)
        source.name = name.strip()
    if collection is not None:
        source.collection = collection
    _check_collection(owner, source.collection)
    if interval_minutes is not None:
        _check_interval(interval_minutes)
        source.interval_minutes = interval_minutes
        source.next_sync_at = timezone.now() + timedelta(minutes=interval_minutes) if interval_minutes else None
    if publish is not None:
        source.publish = publish
    if config is not None:
        source.config = dict(config)
    if secrets is not None:
        try:
            current = decrypt_secrets(source.secrets)
        except SecretsUnreadable:
            current = {}  # unreadable with today's keys: what is sent now replaces it
        merged = {**current, **{k: v for k, v in secrets.items() if isinstance(k, str)}}
        source.secrets = encrypt_secrets(_clean_secrets(merged))
    try:
        current_secrets = decrypt_secrets(source.secrets)
    except SecretsUnreadable as exc:
        raise ValidationFailed(f"secrets: {exc}") from exc
    _validated(source.kind, source.config, current_secrets, source.archive)
    source.updated_at = timezone.now()
    source.full_clean()
    source.save()
    return source


def source_sync_request(*, source: SyncedSource, trigger: str = SyncTrigger.MANUAL) -> SourceSync:
    """Queue a sync of the source (sent to the bulk queue once committed); the one already in flight if any."""
    sync, new = sync_create(source=source, trigger=trigger)
    if new:
        tasks.enqueue_sync(sync.pk)
    return sync


@transaction.atomic
def source_pause(*, source: SyncedSource) -> SyncedSource:
    """No scheduled sync until resumed; "sync now" still works, and a sync already running finishes."""
    SyncedSource.objects.filter(pk=source.pk).update(state=SourceState.PAUSED, updated_at=timezone.now())
    source.state = SourceState.PAUSED
    return source


@transaction.atomic
def source_resume(*, source: SyncedSource) -> SyncedSource:
    """Active again; a schedule already due syncs at beat's next pass."""
    now = timezone.now()
    next_sync_at = source.next_sync_at or (now if source.interval_minutes else None)
    SyncedSource.objects.filter(pk=source.pk).update(state=SourceState.ACTIVE, updated_at=now, next_sync_at=next_sync_at)
    source.state, source.next_sync_at = SourceState.ACTIVE, next_sync_at
    return source


@transaction.atomic
def source_delete(*, source: SyncedSource) -> None:
    """The source goes, with its records and syncs; the documents it wrote stay in their collection."""
    archive = source.archive
    source.delete()
    if archive:
        transaction.on_commit(lambda: _discard(archive))


def _discard(name: str) -> None:
    with contextlib.suppress(*storage_errors()):
        import_storage().delete(name)


def source_upload(*, source: SyncedSource, upload: UploadedFile) -> SourceSync:
    """Keep a new ZIP for an export source (replacing the last one) and sync it."""
    if source.kind != "zip":
        raise ValidationFailed("file: only a ZIP export source takes an upload.")
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    upload.seek(0)
    filename = PurePosixPath((upload.name or "export.zip").replace("\\", "/")).name or "export.zip"
    storage = import_storage()
    try:
        stored = storage.save(f"sources/{source.team_id}/{source.pk}/{digest.hexdigest()[:16]}/{filename}", upload)
    except storage_errors() as exc:
        logger.exception("the imports storage could not be written: the upload is refused")
        raise StorageUnavailable("The file storage could not be reached, so the ZIP was not kept. Try again later.") from exc
    previous = source.archive
    with transaction.atomic():
        SyncedSource.objects.filter(pk=source.pk).update(archive=stored, updated_at=timezone.now())
        source.archive = stored
        sync, new = sync_create(source=source, trigger=SyncTrigger.UPLOAD)
        if new:
            tasks.enqueue_sync(sync.pk)
    if new and previous and previous != stored:
        # No sync was reading the old ZIP (a sync in flight may be: then it stays, and it is small).
        transaction.on_commit(lambda: _discard(previous))
    return sync
