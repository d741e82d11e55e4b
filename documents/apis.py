"""Outline-style RPC endpoints for documents and collections: POST /api/<resource>.<verb>."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from config.errors import Forbidden, RequestTooLarge
from config.rpc import IdInput, PaginationInput, RpcApi, envelope, paginated_envelope, respond, respond_page
from documents import idempotency, selectors, services
from documents.ingestion.errors import size_text
from documents.ingestion.jobs import import_job_create, import_job_refresh
from documents.models import Collection, Document, ImportJob, ImportStage
from documents.tags import MAX_FILTER_TAGS, MAX_TAG_LENGTH, MAX_TAGS_PER_DOCUMENT, normalise_tags
from documents.tasks import enqueue_import
from permissions.http import AuthenticatedRequest
from permissions.models import Access, Role, User
from permissions.policy import (
    can_manage_collections,
    can_write_collection,
    can_write_document,
)
from permissions.selectors import team_group_get, team_member_get


class TagsField(serializers.ListField):
    """A list of tags, normalised as documents.tags does (trimmed, lower-cased, each once, sorted), at most `limit`."""

    def __init__(self, *, limit: int = MAX_TAGS_PER_DOCUMENT, **kwargs: Any) -> None:
        self.limit = limit
        kwargs.setdefault("max_length", limit)
        super().__init__(child=serializers.CharField(allow_blank=True, trim_whitespace=False), **kwargs)

    def to_internal_value(self, data: list[Any]) -> list[str]:
        try:
            return normalise_tags(super().to_internal_value(data), limit=self.limit)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from exc


TAGS_HELP = f"Tags: trimmed and lower-cased, 1 to {MAX_TAG_LENGTH} characters each, no commas; at most {MAX_TAGS_PER_DOCUMENT}."
TAGS_FILTER_HELP = f"Only documents carrying every one of these tags (at most {MAX_FILTER_TAGS})."


class DocumentOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    collectionId = serializers.UUIDField(source="collection_id")
    tags = serializers.ListField(child=serializers.CharField(), help_text="The document's tags, sorted.")
    version = serializers.IntegerField()
    url = serializers.CharField()
    createdBy = serializers.UUIDField(source="created_by_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    publishedAt = serializers.DateTimeField(source="published_at", allow_null=True)
    archivedAt = serializers.DateTimeField(source="archived_at", allow_null=True)
    origin = serializers.CharField(
        allow_blank=True,
        help_text="Where the original lives, for a document a source keeps in sync (a URL, path@commit, a bucket key); else empty.",
    )


class CollectionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    defaultAccess = serializers.CharField(source="default_access")
    createdAt = serializers.DateTimeField(source="created_at")


class MemberInput(serializers.Serializer):
    id = serializers.UUIDField()
    userId = serializers.UUIDField()


class RoleMemberInput(MemberInput):
    role = serializers.ChoiceField(choices=Role.choices, default=Role.READ)


def _writable_document(user: User, document_id: uuid.UUID) -> Document:
    document = selectors.document_get(user=user, document_id=document_id)
    if not can_write_document(user, document):
        raise Forbidden("You can read this document but not change it.")
    return document


def _writable_collection(user: User, collection_id: uuid.UUID, *, refusal: str) -> Collection:
    collection = selectors.collection_get_to_change(user=user, collection_id=collection_id)
    if not can_write_collection(user, collection):
        raise Forbidden(refusal)
    return collection


class DocumentCreateApi(RpcApi):
    write_scope = True

    class Input(serializers.Serializer):
        title = serializers.CharField(max_length=500)
        text = serializers.CharField(
            allow_blank=True, default="", max_length=settings.DOCUMENT_MAX_TEXT_LENGTH, trim_whitespace=False
        )
        collectionId = serializers.UUIDField()
        publish = serializers.BooleanField(default=False)
        tags = TagsField(required=False, help_text=TAGS_HELP)

    error_statuses = (*RpcApi.error_statuses, 422)

    @extend_schema(responses=envelope(DocumentOutput), parameters=[idempotency.SCHEMA_PARAMETER])
    @idempotency.idempotent
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = _writable_collection(
            request.user, data["collectionId"], refusal="You can read this collection but not add documents to it."
        )
        document = services.document_create(
            by=request.user,
            collection=collection,
            title=data["title"],
            text=data["text"],
            publish=data["publish"],
            tags=data.get("tags", []),
        )
        return respond(DocumentOutput, document)


class DocumentListApi(RpcApi):
    write_scope = False
    replica_reads = True

    class Input(PaginationInput):
        collectionId = serializers.UUIDField(required=False)
        archived = serializers.BooleanField(default=False)
        tags = TagsField(required=False, limit=MAX_FILTER_TAGS, help_text=TAGS_FILTER_HELP)

    @extend_schema(responses=paginated_envelope(DocumentOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        documents = selectors.document_list(
            user=request.user, collection_id=data.get("collectionId"), archived=data["archived"], tags=data.get("tags", [])
        )
        return respond_page(DocumentOutput, documents, limit=data["limit"], offset=data["offset"])


class DocumentUpdateApi(RpcApi):
    write_scope = True

    class Input(IdInput):
        title = serializers.CharField(max_length=500, required=False)
        text = serializers.CharField(
            allow_blank=True, required=False, max_length=settings.DOCUMENT_MAX_TEXT_LENGTH, trim_whitespace=False
        )
        publish = serializers.BooleanField(default=False)
        tags = TagsField(required=False, help_text=f"{TAGS_HELP} Replace the document's tags ([] removes them all).")

    @extend_schema(responses=envelope(DocumentOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = services.document_update(
            document=_writable_document(request.user, data["id"]),
            by=request.user,
            title=data.get("title"),
            text=data.get("text"),
            publish=data["publish"],
            tags=data.get("tags"),
        )
        return respond(DocumentOutput, document)


class DocumentChange(Protocol):
    """A lifecycle service: services.document_delete, document_archive, document_unarchive, document_publish."""

    def __call__(self, *, document: Document) -> Document: ...


class DocumentLifecycleApi(RpcApi):
    """documents.delete / archive / unarchive / publish: an id in, the document out."""

    write_scope = True
    Input = IdInput
    change: DocumentChange  # each subclass sets its service

    @extend_schema(responses=envelope(DocumentOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = self.change(document=_writable_document(request.user, data["id"]))
        return respond(DocumentOutput, document)


class DocumentDeleteApi(DocumentLifecycleApi):
    change = staticmethod(services.document_delete)


class DocumentArchiveApi(DocumentLifecycleApi):
    change = staticmethod(services.document_archive)


class DocumentUnarchiveApi(DocumentLifecycleApi):
    change = staticmethod(services.document_unarchive)


class DocumentPublishApi(DocumentLifecycleApi):
    change = staticmethod(services.document_publish)


class DocumentAddUserApi(RpcApi):
    write_scope = True
    Input = RoleMemberInput

    @extend_schema(responses=envelope(DocumentOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = _writable_document(request.user, data["id"])
        member = team_member_get(user=request.user, user_id=data["userId"])
        services.document_membership_set(document=document, user=member, role=data["role"])
        return respond(DocumentOutput, document)


class DocumentRemoveUserApi(RpcApi):
    write_scope = True
    Input = MemberInput

    @extend_schema(responses=envelope(DocumentOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = _writable_document(request.user, data["id"])
        member = team_member_get(user=request.user, user_id=data["userId"])
        services.document_membership_remove(document=document, user=member)
        return respond(DocumentOutput, document)


class TagOutput(serializers.Serializer):
    name = serializers.CharField()
    documents = serializers.IntegerField(help_text="Documents you can read (not archived) that carry the tag.")


class TagListApi(RpcApi):
    """The tags of the documents you can read, most used first, with how many of those documents carry each."""

    write_scope = False

    class Input(PaginationInput):
        query = serializers.CharField(max_length=MAX_TAG_LENGTH, allow_blank=True, default="", help_text="A part of the tag.")
        collectionId = serializers.UUIDField(required=False)

    @extend_schema(responses=paginated_envelope(TagOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        tags, total = selectors.tag_list(
            user=request.user,
            collection_id=data.get("collectionId"),
            query=data["query"],
            limit=data["limit"],
            offset=data["offset"],
        )
        body = {"data": tags, "pagination": {"limit": data["limit"], "offset": data["offset"], "total": total}}
        return Response(paginated_envelope(TagOutput)(body).data)


class CollectionCreateApi(RpcApi):
    write_scope = True
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(allow_blank=True, default="", max_length=10_000)
        defaultAccess = serializers.ChoiceField(choices=Access.choices, default=Access.READ_WRITE)

    @extend_schema(responses=envelope(CollectionOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        if not can_manage_collections(request.user):
            raise Forbidden("Only team admins can create collections.")
        collection = services.collection_create(
            by=request.user, name=data["name"], description=data["description"], default_access=data["defaultAccess"]
        )
        return respond(CollectionOutput, collection)


class CollectionListApi(RpcApi):
    write_scope = False
    Input = PaginationInput
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    @extend_schema(responses=paginated_envelope(CollectionOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond_page(
            CollectionOutput, selectors.collection_list(user=request.user), limit=data["limit"], offset=data["offset"]
        )


MANAGE_MEMBERS_REFUSAL = "You can read this collection but not manage its members."


class CollectionAddUserApi(RpcApi):
    write_scope = True
    Input = RoleMemberInput

    @extend_schema(responses=envelope(CollectionOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = _writable_collection(request.user, data["id"], refusal=MANAGE_MEMBERS_REFUSAL)
        member = team_member_get(user=request.user, user_id=data["userId"])
        services.collection_membership_set(collection=collection, user=member, role=data["role"])
        return respond(CollectionOutput, collection)


class CollectionRemoveUserApi(RpcApi):
    write_scope = True
    Input = MemberInput

    @extend_schema(responses=envelope(CollectionOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = _writable_collection(request.user, data["id"], refusal=MANAGE_MEMBERS_REFUSAL)
        member = team_member_get(user=request.user, user_id=data["userId"])
        services.collection_membership_remove(collection=collection, user=member)
        return respond(CollectionOutput, collection)


class GrantOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["user", "group"])
    id = serializers.UUIDField(help_text="The user's or the group's id.")
    name = serializers.CharField(help_text="The user's name or the group's.")
    role = serializers.CharField(help_text="read or read_write.")


class CollectionInfoOutput(CollectionOutput):
    grants = GrantOutput(many=True, help_text="Groups and people the collection is shared with beyond its default access.")


class CollectionDeletedOutput(CollectionOutput):
    deletedAt = serializers.DateTimeField(source="deleted_at")


def _managed_collection(user: User, collection_id: uuid.UUID) -> Collection:
    """A collection of the team for a team admin; Forbidden for a member who can read it, NotFound for anyone else."""
    collection = selectors.collection_get_to_change(user=user, collection_id=collection_id)
    if not can_manage_collections(user):
        raise Forbidden("Only team admins can change a collection's settings or delete it.")
    return collection


def _with_grants(collection: Collection) -> Collection:
    # ignore: CollectionInfoOutput renders a collection carrying its grants, which are no field of the model.
    collection.grants = selectors.collection_grants(collection=collection)  # type: ignore[attr-defined]
    return collection


class CollectionInfoApi(RpcApi):
    """One collection and whom it is shared with: for those who can read it, and for the team's admins."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(CollectionInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = selectors.collection_get_to_change(user=request.user, collection_id=data["id"])
        return respond(CollectionInfoOutput, _with_grants(collection))


class CollectionUpdateApi(RpcApi):
    """Rename a collection, change its description or the team's default access (team admins)."""

    write_scope = True

    class Input(IdInput):
        name = serializers.CharField(max_length=200, required=False)
        description = serializers.CharField(allow_blank=True, required=False, max_length=10_000)
        defaultAccess = serializers.ChoiceField(choices=Access.choices, required=False)

    @extend_schema(responses=envelope(CollectionInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = services.collection_update(
            collection=_managed_collection(request.user, data["id"]),
            name=data.get("name"),
            description=data.get("description"),
            default_access=data.get("defaultAccess"),
        )
        return respond(CollectionInfoOutput, _with_grants(collection))


class CollectionDeleteApi(RpcApi):
    """Delete a collection (team admins). One holding documents needs `confirm`: they are deleted with it."""

    write_scope = True
    error_statuses = (*RpcApi.error_statuses, 409)

    class Input(IdInput):
        confirm = serializers.BooleanField(
            default=False, help_text="Delete the documents in it too; without it, a collection holding documents is refused."
        )

    @extend_schema(responses=envelope(CollectionDeletedOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = services.collection_delete(collection=_managed_collection(request.user, data["id"]), confirm=data["confirm"])
        return respond(CollectionDeletedOutput, collection)


class GroupMemberInput(serializers.Serializer):
    id = serializers.UUIDField()
    groupId = serializers.UUIDField()


class RoleGroupInput(GroupMemberInput):
    role = serializers.ChoiceField(choices=Role.choices, default=Role.READ)


class CollectionAddGroupApi(RpcApi):
    """Share a collection with a group of the team, or change the group's role in it."""

    write_scope = True
    Input = RoleGroupInput

    @extend_schema(responses=envelope(CollectionInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = _writable_collection(request.user, data["id"], refusal=MANAGE_MEMBERS_REFUSAL)
        group = team_group_get(user=request.user, group_id=data["groupId"])
        services.collection_membership_set(collection=collection, group=group, role=data["role"])
        return respond(CollectionInfoOutput, _with_grants(collection))


class CollectionRemoveGroupApi(RpcApi):
    write_scope = True
    Input = GroupMemberInput

    @extend_schema(responses=envelope(CollectionInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = _writable_collection(request.user, data["id"], refusal=MANAGE_MEMBERS_REFUSAL)
        group = team_group_get(user=request.user, group_id=data["groupId"])
        services.collection_membership_remove(collection=collection, group=group)
        return respond(CollectionInfoOutput, _with_grants(collection))


class SourceOutput(serializers.Serializer):
    filename = serializers.CharField()
    path = serializers.CharField(help_text="The file's path inside the imported folder or archive.")
    format = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    version = serializers.IntegerField(source="document_version", help_text="The document version read from this file.")
    pages = serializers.IntegerField(source="page_count", help_text="Pages of a PDF; 0 for other formats.")
    originalUrl = serializers.CharField(source="original_url")
    importedAt = serializers.DateTimeField(source="created_at")


class DocumentInfoOutput(DocumentOutput):
    # ignore: the API's field is named "source", which the stubs type as Field.source (as with "context" in rag).
    source = SourceOutput(allow_null=True, help_text="The file the document was imported from; null when written in Cairn.")  # type: ignore[assignment]


class DocumentInfoApi(RpcApi):
    write_scope = False
    replica_reads = True
    Input = IdInput

    @extend_schema(responses=envelope(DocumentInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = selectors.document_get(user=request.user, document_id=data["id"])
        # ignore: DocumentInfoOutput renders a document carrying its source (rag.mcp.tools sets it the same way).
        document.source = selectors.source_of(document=document)  # type: ignore[attr-defined]
        return respond(DocumentInfoOutput, document)


class VersionOutput(serializers.Serializer):
    id = serializers.UUIDField(help_text="The history entry.")
    version = serializers.IntegerField(
        help_text="The document's version; a title change alone keeps it, so entries can share one."
    )
    title = serializers.CharField()
    createdBy = serializers.UUIDField(
        source="created_by_id", allow_null=True, help_text="Who made the change; null when unknown."
    )
    createdAt = serializers.DateTimeField(source="created_at")


class VersionTextOutput(VersionOutput):
    text = serializers.CharField(allow_blank=True)


class DocumentVersionsApi(RpcApi):
    """A document's history, newest first: one entry per title or text change."""

    write_scope = False

    class Input(PaginationInput, IdInput):
        pass

    @extend_schema(responses=paginated_envelope(VersionOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = selectors.document_get(user=request.user, document_id=data["id"])
        return respond_page(
            VersionOutput, selectors.document_versions(document=document), limit=data["limit"], offset=data["offset"]
        )


class DocumentVersionApi(RpcApi):
    """A document's title and text at one version."""

    write_scope = False

    class Input(IdInput):
        version = serializers.IntegerField(min_value=1, max_value=2_147_483_647)

    @extend_schema(responses=envelope(VersionTextOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        entry = selectors.document_version_at(user=request.user, document_id=data["id"], version=data["version"])
        return respond(VersionTextOutput, entry)


class ImportFileOutput(serializers.Serializer):
    path = serializers.CharField()
    outcome = serializers.CharField(help_text="created, updated (a new version), unchanged, failed or archived (file gone).")
    format = serializers.CharField(allow_blank=True)
    size = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(source="error", allow_blank=True, help_text="Why the file failed.")
    documentId = serializers.UUIDField(source="document_id", allow_null=True, help_text="Null unless you may read the document.")
    title = serializers.CharField(allow_blank=True)


class ImportJobSummaryOutput(serializers.Serializer):
    id = serializers.UUIDField()
    stage = serializers.CharField(help_text="queued, parsing, indexing, done or failed.")
    collectionId = serializers.UUIDField(source="collection_id")
    origin = serializers.CharField()
    publish = serializers.BooleanField()
    filesTotal = serializers.IntegerField(source="files_total")
    filesDone = serializers.IntegerField(source="files_done", help_text="Files handled so far, failed ones included.")
    filesFailed = serializers.IntegerField(source="files_failed")
    error = serializers.CharField(allow_blank=True, help_text="Why the job as a whole failed.")
    createdBy = serializers.UUIDField(source="created_by_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)


class ImportJobOutput(ImportJobSummaryOutput):
    # Set by import_job_refresh while the job parses or indexes; null otherwise.
    chunksTotal = serializers.IntegerField(
        source="index_progress.chunks_total",
        default=None,
        allow_null=True,
        help_text="Passages the job's documents hold, the ones not indexed yet estimated from their length; "
        "null unless the job is parsing or indexing.",
    )
    chunksEmbedded = serializers.IntegerField(
        source="index_progress.chunks_embedded",
        default=None,
        allow_null=True,
        help_text="Passages of the job's documents indexed so far; null unless the job is parsing or indexing.",
    )
    etaSeconds = serializers.IntegerField(
        source="index_progress.eta_seconds",
        default=None,
        allow_null=True,
        help_text="Seconds until the rest is indexed, at the rate seen so far; null before a rate is known.",
    )
    files = ImportFileOutput(many=True, source="file_outcomes")


def _job_with_files(user: User, job: ImportJob) -> ImportJob:
    # ignore: ImportJobOutput renders a job carrying its file outcomes, which are no field of the model.
    job.file_outcomes = selectors.import_job_files(user=user, job=job)  # type: ignore[attr-defined]
    return job


class JobInfoApi(RpcApi):
    """One import job: stage, progress, and what became of each file."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(ImportJobOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        job = import_job_refresh(selectors.import_job_get(user=request.user, job_id=data["id"]))
        return respond(ImportJobOutput, _job_with_files(request.user, job))


class JobListApi(RpcApi):
    """Your import jobs, newest first; a team admin also sees the team's into the collections they can read."""

    write_scope = False
    Input = PaginationInput
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    @extend_schema(responses=paginated_envelope(ImportJobSummaryOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        jobs = selectors.import_job_list(user=request.user)
        for job in jobs.filter(stage=ImportStage.INDEXING)[:100]:
            import_job_refresh(job)
        return respond_page(ImportJobSummaryOutput, jobs, limit=data["limit"], offset=data["offset"])


class DocumentImportApi(RpcApi):
    """Upload files (Markdown, text, HTML, PDF, DOCX) or ZIP archives of them; they are imported as a job."""

    write_scope = True
    parser_classes = [MultiPartParser]
    error_statuses = (400, 401, 403, 404, 413, 429, 503)

    class Input(serializers.Serializer):
        collectionId = serializers.UUIDField()
        publish = serializers.BooleanField(default=False)
        files = serializers.ListField(
            child=serializers.FileField(allow_empty_file=True), min_length=1, help_text="One or more files (multipart)."
        )

    @extend_schema(request={"multipart/form-data": Input}, responses=envelope(ImportJobOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        limit = settings.IMPORT_MAX_REQUEST_SIZE
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise RequestTooLarge(f"The upload is larger than the {size_text(limit)} limit per request.")
        data = self.validated(request)
        if sum(f.size or 0 for f in data["files"]) > limit:
            raise RequestTooLarge(f"The upload is larger than the {size_text(limit)} limit per request.")
        collection = _writable_collection(
            request.user, data["collectionId"], refusal="You can read this collection but not import documents into it."
        )
        names = ", ".join(f.name for f in data["files"])
        job = import_job_create(
            by=request.user, collection=collection, origin=names, publish=data["publish"], uploads=data["files"]
        )
        enqueue_import(job.pk)
        return respond(ImportJobOutput, _job_with_files(request.user, job))
