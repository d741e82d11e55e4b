from __future__ import annotations

import uuid
from bisect import bisect_right
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Exists, Lookup, OuterRef, Q
from django.utils import timezone

from documents.tags import MAX_TAG_LENGTH, normalise_tags
from permissions.models import Access, GroupMembership, Role, Team, User
from permissions.policy import can_see_team_jobs

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.core.files.storage import Storage
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType


class AnyOf(Lookup):
    """`field = ANY(ARRAY(subquery))`: the subquery runs once and the comparison can use an index.

    (`field IN (subquery)` inside an OR becomes a hashed subplan checked against every row of
    the team's documents: a sequential scan of a wide table on every search.)
    """

    lookup_name = "any_of"

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> _AsSqlType:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        rhs = rhs.strip()
        if not rhs.startswith("("):
            rhs = f"({rhs})"
        return f"{lhs} = ANY(ARRAY{rhs})", (*lhs_params, *rhs_params)


models.UUIDField.register_lookup(AnyOf)
models.ForeignKey.register_lookup(AnyOf)


class CollectionQuerySet(models.QuerySet):
    def visible_to(self, user: User | AnonymousUser | None) -> CollectionQuerySet:
        """Collections the user may read: team default access or a membership (direct or group)."""
        if not isinstance(user, User) or user.team_id is None:
            return self.none()
        member = CollectionMembership.objects.filter(collection_id=OuterRef("pk")).filter(
            Q(user_id=user.pk) | Q(group_id__in=GroupMembership.objects.filter(user_id=user.pk).values("group_id"))
        )
        return self.filter(team_id=user.team_id, deleted_at__isnull=True).filter(
            Q(default_access__in=[Access.READ, Access.READ_WRITE]) | Exists(member)
        )

    def of_team(self, user: User) -> CollectionQuerySet:
        """Every collection of the user's team that is not deleted, whatever the user may read: what a team admin manages."""
        if user.team_id is None:
            return self.none()
        return self.filter(team_id=user.team_id, deleted_at__isnull=True)


class Collection(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    default_access = models.CharField(
        max_length=12,
        choices=Access.choices,
        default=Access.READ_WRITE,
        help_text="What every member of the team may do without a membership.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    # Set by collection_delete when the collection held documents: they are deleted with it, and both
    # stay in the database so an operator can restore them (documents.services.collection_restore).
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = CollectionQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        # Two shelves of one name would be told apart by nobody: in lists, filters and the import page.
        namesakes = Collection.objects.filter(team_id=self.team_id, name__iexact=self.name.strip(), deleted_at__isnull=True)
        if self.deleted_at is None and namesakes.exclude(pk=self.pk).exists():
            raise ValidationError({"name": f"The team already has a collection named {self.name.strip()!r}."})


class CollectionMembership(models.Model):
    """A user's or a group's role in one collection."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    group = models.ForeignKey(
        "permissions.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False),
                name="collection_membership_user_xor_group",
            ),
            models.UniqueConstraint(fields=["collection", "user"], name="unique_collection_user"),
            models.UniqueConstraint(fields=["collection", "group"], name="unique_collection_group"),
        ]


class DocumentQuerySet(models.QuerySet):
    def _policy(
        self, user: User | AnonymousUser | None, include_archived: bool
    ) -> tuple[DocumentQuerySet, models.QuerySet, models.QuerySet] | None:
        """The access policy's parts: the documents it considers, the collections the user may read, the
        documents shared with the user. None when the user sees nothing."""
        if not isinstance(user, User) or user.team_id is None:
            return None
        readable_collections = Collection.objects.visible_to(user).values("id")
        shared_with_user = DocumentMembership.objects.filter(user_id=user.pk).values("document_id")
        qs = self.filter(team_id=user.team_id, deleted_at__isnull=True).filter(
            Q(published_at__isnull=False) | Q(created_by_id=user.pk)
        )
        if not include_archived:
            qs = qs.filter(archived_at__isnull=True)
        return qs, readable_collections, shared_with_user

    def visible_to(self, user: User | AnonymousUser | None, *, include_archived: bool = False) -> DocumentQuerySet:
        """The one access policy, in SQL (DESIGN.md "Who sees what")."""
        policy = self._policy(user, include_archived)
        if policy is None:
            return self.none()
        qs, readable_collections, shared_with_user = policy
        # Access through the collection (the team's default or a membership, see
        # CollectionQuerySet.visible_to) or a document membership.
        return qs.filter(Q(collection_id__any_of=readable_collections) | Q(pk__any_of=shared_with_user))

    def visible_to_each_way(self, user: User | AnonymousUser | None) -> tuple[DocumentQuerySet, DocumentQuerySet]:
        """`visible_to(user)` as two disjoint querysets, whose union it is: the documents readable through
        their collection, and those only shared with the user.

        Search reads the visible set on every query. Without the OR, the planner joins the readable
        collections (a few rows) with the documents through an index holding what the policy reads
        (document_visible_by_collection), instead of guessing what share of the team an array of
        collections it cannot see holds and, with few collections, scanning every document row.
        """
        policy = self._policy(user, include_archived=False)
        if policy is None:
            return self.none(), self.none()
        qs, readable_collections, shared_with_user = policy
        through_collection = qs.filter(collection_id__in=readable_collections)
        only_shared = qs.filter(pk__in=shared_with_user).exclude(collection_id__in=readable_collections)
        return through_collection, only_shared


class Document(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="documents")
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="documents")
    title = models.CharField(max_length=500)
    text = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1, help_text="Bumped on every content change.")
    created_by = models.ForeignKey(
        # Blank too: a document outlives its author, and must stay editable when the author is deleted.
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="created_documents",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Normalised by `clean` (documents.tags): lower-cased, each once, sorted. Filters match every listed tag.
    tags = ArrayField(
        models.CharField(max_length=MAX_TAG_LENGTH),
        default=list,
        blank=True,
        help_text="Topics to filter search, answers and lists by, separated by commas.",
    )

    # Where a reader finds the original, for a document a source keeps in sync (connectors): a URL,
    # "path@commit", "s3://bucket/key", a file on the server. Shown on the page and in citations.
    origin = models.CharField(max_length=2048, blank=True, default="")

    objects = DocumentQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["team", "collection"], name="document_team_collection"),
            models.Index(fields=["team", "updated_at"], name="document_team_updated"),
            # Search's visible set, read index-only per readable collection (DocumentQuerySet.visible_to_each_way):
            # every column the policy and the rankings' join read, for the documents search may show.
            models.Index(
                fields=["collection", "team"],
                include=["id", "version", "published_at", "created_by"],
                condition=Q(deleted_at__isnull=True, archived_at__isnull=True),
                name="document_visible_by_collection",
            ),
            # `tags @> ARRAY[...]`: the tag filter inside search's visible scope and documents.list.
            GinIndex(fields=["tags"], name="document_tags"),
        ]

    def __str__(self) -> str:
        return self.title

    def clean(self) -> None:
        try:
            self.tags = normalise_tags(self.tags or [])
        except ValidationError as exc:
            raise ValidationError({"tags": exc.messages}) from exc
        # The index keeps a document's passages and graph facts under its team: it never changes team.
        if self.team_id is not None and self.collection_id is not None:
            collection_team = Collection.objects.filter(pk=self.collection_id).values_list("team_id", flat=True).first()
            if collection_team != self.team_id:
                raise ValidationError({"collection": "A document can only be in a collection of its own team."})

    @property
    def url(self) -> str:
        return f"/doc/{self.id}"


class DocumentVersion(models.Model):
    """A document's title and text as one change left them: written by the services on create and on every
    title or text change, so the history can be listed, diffed and restored.

    `version` is the document's version at the time: a text change makes a new one, a title change
    alone keeps it (it costs no reindex), so a version's entries share one text. Read them through
    the document (documents.selectors.document_versions): who reads the document reads its history.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=500)
    text = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["document", "version", "created_at"], name="document_version_order")]

    def __str__(self) -> str:
        return f"{self.title} (version {self.version})"


class DocumentMembership(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="document_memberships")
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "user"], name="unique_document_user")]


def import_storage() -> Storage:
    """Where originals and waiting uploads are kept: STORAGES["imports"] (a folder under var/ by default).

    Read and write through this function, not `Source.original.storage`: a FileField calls its
    storage callable once, when the model class is built, so it would miss a later settings change.
    """
    from django.core.files.storage import storages

    return storages["imports"]


def storage_errors() -> tuple[type[Exception], ...]:
    """What `import_storage()` raises when it cannot be reached: a folder's OSError, or an S3 bucket's
    (botocore's) connection and service errors. Imported here, on first use: a folder install never pays for it."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (OSError, BotoCoreError, ClientError)


class SourceFormat(models.TextChoices):
    MARKDOWN = "markdown", "Markdown"
    TEXT = "text", "Plain text"
    HTML = "html", "HTML"
    PDF = "pdf", "PDF"
    DOCX = "docx", "Word (DOCX)"
    CODE = "code", "Source code"


class Source(models.Model):
    """The file one version of an imported document was read from.

    One row per (document, version): a citation of an older version still finds its pages. The
    original bytes are stored by content (`originals/<team>/<sha256>`), so a file imported twice
    is stored once and no name a user chose becomes a path on disk.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="sources")
    document_version = models.PositiveIntegerField()
    # The identity of the file across imports into one collection: its path inside the folder or
    # archive (POSIX, relative), or its file name for a plain upload.
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=1024)
    filename = models.CharField(max_length=255)
    format = models.CharField(max_length=12, choices=SourceFormat.choices)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    # Character offset in the document's text where each page starts (PDF); empty for other formats.
    page_map = models.JSONField(default=list, blank=True)
    original = models.FileField(storage=import_storage, max_length=300)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "document_version"], name="unique_source_per_version")]
        indexes = [models.Index(fields=["collection", "path"], name="source_collection_path")]

    def __str__(self) -> str:
        return self.path

    @property
    def page_count(self) -> int:
        return len(self.page_map)

    @property
    def original_url(self) -> str:
        return f"/doc/{self.document_id}/original?v={self.document_version}"

    def page_of(self, offset: int) -> int | None:
        """The 1-based page holding character `offset`, or None when the source has no pages."""
        if not self.page_map:
            return None
        return max(1, bisect_right(self.page_map, offset))


class ImportStage(models.TextChoices):
    QUEUED = "queued", "Queued"
    PARSING = "parsing", "Parsing"
    INDEXING = "indexing", "Indexing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ImportJobQuerySet(models.QuerySet):
    def visible_to(self, user: User | AnonymousUser | None) -> ImportJobQuerySet:
        """A job is seen by whoever started it, and by the admins of its team (permissions.policy) when they
        may read its collection: its file names are the collection's content."""
        if not isinstance(user, User) or user.team_id is None:
            return self.none()
        qs = self.filter(team_id=user.team_id)
        if not can_see_team_jobs(user):
            return qs.filter(created_by_id=user.pk)
        return qs.filter(Q(created_by_id=user.pk) | Q(collection_id__in=Collection.objects.visible_to(user).values("id")))


class ImportJob(models.Model):
    """One import (an upload or an import_path run): its stage, progress and the outcome of each file."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="import_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    origin = models.CharField(max_length=300, help_text="What was imported: the uploaded names or the folder.")
    publish = models.BooleanField(default=False)
    stage = models.CharField(max_length=12, choices=ImportStage.choices, default=ImportStage.QUEUED)
    files_total = models.PositiveIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0, help_text="Files handled so far, failed ones included.")
    files_failed = models.PositiveIntegerField(default=0)
    # Uploads waiting for the worker: [{"name": ..., "key": storage name, "size": ...}].
    uploads = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, help_text="Why the job as a whole failed.")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When its task was handed to the broker (none while the broker is down): a queued job with one is
    # waiting in the queue and left to it, one without is sent again by the recovery pass.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # The worker running it writes this every TASK_HEARTBEAT_INTERVAL seconds; older than IMPORT_LEASE, the
    # worker is presumed dead and the job is queued again.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = ImportJobQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["team", "-created_at"], name="import_job_team_created")]

    def __str__(self) -> str:
        return f"Import {self.origin}"


class ImportOutcome(models.TextChoices):
    CREATED = "created", "Created"
    UPDATED = "updated", "New version"
    UNCHANGED = "unchanged", "Unchanged"
    FAILED = "failed", "Failed"
    ARCHIVED = "archived", "Archived (file gone)"


class ImportFile(models.Model):
    """What one file of an import became."""

    job = models.ForeignKey(ImportJob, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1024)
    outcome = models.CharField(max_length=12, choices=ImportOutcome.choices)
    format = models.CharField(max_length=12, choices=SourceFormat.choices, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        indexes = [models.Index(fields=["job", "outcome"], name="import_file_job_outcome")]


class IdempotentRequest(models.Model):
    """A write sent with an `Idempotency-Key`: a retry with the same key and body gets the stored response back."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    endpoint = models.CharField(max_length=100)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the request body as parsed JSON, keys sorted.")
    status = models.PositiveSmallIntegerField(default=0)
    response = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "idempotent_requests"
        constraints = [models.UniqueConstraint(fields=["user", "endpoint", "key"], name="unique_idempotency_key")]
