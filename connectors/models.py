"""Sources kept in sync with a collection: the source, what each of its keys became, and each sync run.

`documents.Source` is something else: the original file of one imported document version.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from documents.models import Collection, Document
from permissions.models import Team, User
from permissions.policy import can_see_team_jobs

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser


class SourceState(models.TextChoices):
    ACTIVE = "active", "Active"
    PAUSED = "paused", "Paused"


class SyncedSourceQuerySet(models.QuerySet):
    def visible_to(self, user: User | AnonymousUser | None) -> SyncedSourceQuerySet:
        """A source (its name, configuration and errors) is seen by its owner and by its team's admins; nobody else."""
        if not isinstance(user, User) or user.team_id is None:
            return self.none()
        qs = self.filter(team_id=user.team_id)
        if can_see_team_jobs(user):
            return qs
        return qs.filter(owner_id=user.pk)


class SyncedSource(models.Model):
    """A place a team's knowledge lives (a folder, a ZIP export, a repository, a site, a bucket), kept in sync with a collection."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    # Whose rights the sync writes with: it stops with an error when they can no longer write the collection.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    # Validated by the kind's `from_config`; never holds a secret.
    config = models.JSONField(default=dict, blank=True)
    # The secrets (a token, a password) as one Fernet token of their JSON (connectors.secrets); never shown.
    secrets = models.TextField(blank=True, default="")
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="+")
    publish = models.BooleanField(default=True, help_text="Publish the documents the source writes (else drafts of its owner).")
    # Minutes between scheduled syncs; 0 syncs only when asked ("sync now", an upload).
    interval_minutes = models.PositiveIntegerField(default=60)
    state = models.CharField(max_length=8, choices=SourceState.choices, default=SourceState.ACTIVE)
    # The uploaded ZIP of an export source (a name in the imports storage); set by sources.upload, not by config.
    archive = models.CharField(max_length=300, blank=True, default="")
    cursor = models.CharField(max_length=500, blank=True, default="", help_text="Where the source stood at the last sync.")
    next_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync = models.ForeignKey("SourceSync", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = SyncedSourceQuerySet.as_manager()

    class Meta:
        db_table = "connector_sources"
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_source_name_per_team")]
        indexes = [models.Index(fields=["state", "next_sync_at"], name="connector_source_due")]

    def __str__(self) -> str:
        return self.name


class ItemOutcome(models.TextChoices):
    CREATED = "created", "New"
    CHANGED = "changed", "Changed"


class SyncedItem(models.Model):
    """What one key of a source became at the last sync that wrote it: its version, its document, the connector's memory.

    Written in the same transaction as the document, so a sync killed mid-way resumes without duplicates.
    """

    source = models.ForeignKey(SyncedSource, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=2048)
    version = models.CharField(max_length=200)
    origin = models.CharField(max_length=2048, blank=True, default="")
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.JSONField(default=dict, blank=True)
    links = models.JSONField(default=list, blank=True)
    # The sync that wrote this record, and whether it created or changed the document: a resumed sync counts it once.
    written_by = models.ForeignKey("SourceSync", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.CharField(max_length=8, choices=ItemOutcome.choices, default=ItemOutcome.CREATED)
    # Set when the key was no longer at the source (its document archived); cleared when it comes back.
    gone_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "connector_items"
        constraints = [models.UniqueConstraint(fields=["source", "key"], name="unique_connector_item_key")]
        indexes = [models.Index(fields=["written_by"], name="connector_item_written_by")]

    def __str__(self) -> str:
        return self.key


class SyncStage(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Syncing"
    INDEXING = "indexing", "Indexing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


IN_FLIGHT = (SyncStage.QUEUED, SyncStage.RUNNING)


class SyncTrigger(models.TextChoices):
    SCHEDULE = "schedule", "Schedule"
    MANUAL = "manual", "Sync now"
    UPLOAD = "upload", "Upload"


class SourceSync(models.Model):
    """One sync of a source: its stage, its counts and the error of each item that failed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(SyncedSource, on_delete=models.CASCADE, related_name="syncs")
    trigger = models.CharField(max_length=8, choices=SyncTrigger.choices, default=SyncTrigger.MANUAL)
    stage = models.CharField(max_length=8, choices=SyncStage.choices, default=SyncStage.QUEUED)
    seen = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0, help_text="Documents archived: their item is gone from the source.")
    failed = models.PositiveIntegerField(default=0)
    # [{"key": ..., "message": ...}], at most connectors.sync.MAX_ERRORS of them.
    errors = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="", help_text="Why the sync as a whole failed.")
    cursor = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # As for import jobs: when its task reached the broker, and the running worker's sign of life.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "connector_syncs"
        constraints = [
            # One sync per source at a time: a second "sync now" finds the first one.
            models.UniqueConstraint(fields=["source"], condition=Q(stage__in=IN_FLIGHT), name="one_sync_in_flight_per_source")
        ]
        indexes = [models.Index(fields=["source", "-created_at"], name="connector_sync_source_created")]

    def __str__(self) -> str:
        return f"Sync of {self.source_id} ({self.stage})"
