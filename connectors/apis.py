"""sources.*: keep a collection in sync with a folder, an export, a repository, a site or a bucket.

A source's configuration and errors are seen by its owner and its team's admins; anyone else gets 404.
Secrets go in (`secrets`) and never come out: outputs name the secrets that are set, not their values.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from config.errors import Forbidden, RequestTooLarge
from config.rpc import IdInput, PaginationInput, RpcApi, envelope, paginated_envelope, respond, respond_page
from connectors import selectors, services
from connectors.kinds import KINDS
from connectors.models import SyncedSource
from documents.ingestion.errors import size_text
from documents.selectors import collection_get_to_change
from permissions.http import AuthenticatedRequest
from permissions.models import User
from permissions.policy import can_write


class SyncErrorOutput(serializers.Serializer):
    key = serializers.CharField(help_text="The item: a path, a URL, a bucket key.")
    message = serializers.CharField()


class SyncOutput(serializers.Serializer):
    id = serializers.UUIDField()
    trigger = serializers.CharField(help_text="schedule, manual (sync now) or upload.")
    stage = serializers.CharField(help_text="queued, running, indexing, done or failed.")
    seen = serializers.IntegerField(help_text="Items listed at the source.")
    new = serializers.IntegerField(source="created", help_text="Items that became new documents.")
    changed = serializers.IntegerField(help_text="Items that became a new version of their document (or came back).")
    unchanged = serializers.IntegerField(help_text="Items skipped: same version as last time (no fetch, no parse, no embedding).")
    deleted = serializers.IntegerField(help_text="Documents archived because their item is gone from the source.")
    failed = serializers.IntegerField()
    errors = SyncErrorOutput(many=True, help_text="Why each failed item failed (the first 200).")  # type: ignore[assignment]  # the JSON field is named errors
    error = serializers.CharField(allow_blank=True, help_text="Why the sync as a whole failed; nothing was archived.")
    cursor = serializers.CharField(allow_blank=True, help_text="Where the source stood (a commit, a crawl time).")
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    chunksTotal = serializers.IntegerField(
        source="index_progress.chunks_total",
        default=None,
        allow_null=True,
        help_text="Passages of the documents this sync wrote, the ones not indexed yet estimated; null unless running or indexing.",
    )
    chunksEmbedded = serializers.IntegerField(
        source="index_progress.chunks_embedded", default=None, allow_null=True, help_text="Of those, the passages indexed so far."
    )
    etaSeconds = serializers.IntegerField(
        source="index_progress.eta_seconds",
        default=None,
        allow_null=True,
        help_text="Seconds until indexed, at the rate seen so far.",
    )


class SyncedSourceOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    config = serializers.JSONField(help_text="The kind's configuration, as given (never a secret).")
    secrets = serializers.SerializerMethodField(help_text="The names of the secrets that are set; their values are never shown.")
    collectionId = serializers.UUIDField(source="collection_id")
    collectionName = serializers.CharField(source="collection.name")
    ownerId = serializers.UUIDField(source="owner_id", allow_null=True)
    state = serializers.CharField(help_text="active or paused (no scheduled sync).")
    intervalMinutes = serializers.IntegerField(
        source="interval_minutes", help_text="Minutes between scheduled syncs; 0: only when asked."
    )
    publish = serializers.BooleanField()
    archiveName = serializers.SerializerMethodField(
        help_text="The uploaded ZIP of an export source; null before one is uploaded."
    )
    nextSyncAt = serializers.DateTimeField(source="next_sync_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    lastSync = SyncOutput(source="current_sync", allow_null=True, default=None, help_text="The latest sync, running or finished.")

    def get_secrets(self, source: SyncedSource) -> list[str]:
        return selectors.secret_names(source)

    def get_archiveName(self, source: SyncedSource) -> str | None:
        return source.archive.rsplit("/", 1)[-1] if source.archive else None


class SourceKindFieldOutput(serializers.Serializer):
    # The JSON fields are named as a form's are; the stubs type Field's own label and required.
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    required = serializers.BooleanField()  # type: ignore[assignment]
    help = serializers.CharField(allow_blank=True)
    choices = serializers.ListField(child=serializers.CharField())
    default = serializers.JSONField(allow_null=True)
    type = serializers.CharField()


class SourceKindOutput(serializers.Serializer):
    kind = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the JSON field is named label
    fields = SourceKindFieldOutput(many=True)  # type: ignore[assignment]  # the JSON field is named fields
    secretFields = SourceKindFieldOutput(many=True, source="secret_fields")


def kinds() -> list[dict[str, Any]]:
    return [
        {
            "kind": name,
            "label": getattr(cls, "label", name),
            "fields": list(getattr(cls, "fields", ())),
            "secret_fields": list(getattr(cls, "secret_fields", ())),
        }
        for name, cls in sorted(KINDS.items())
    ]


def _changeable(user: User, source_id: uuid.UUID) -> SyncedSource:
    source = selectors.source_get(user=user, source_id=source_id)
    if not can_write(user):
        raise Forbidden("You can see this source but not change it.")
    return source


def _shown(source: SyncedSource) -> SyncedSource:
    return selectors.source_with_progress(SyncedSource.objects.select_related("collection").get(pk=source.pk))


SECRETS_HELP = "Credentials (a token, a password), by name: stored encrypted and never returned."


class SourceKindsApi(RpcApi):
    """The kinds of source this server knows, with the fields of each one's configuration and secrets."""

    write_scope = False
    error_statuses = (400, 401, 403, 429)

    @extend_schema(responses=envelope(SourceKindOutput, many=True))
    def post(self, request: AuthenticatedRequest) -> Response:
        self.validated(request)
        return respond(SourceKindOutput, kinds(), many=True)


class SourceListApi(RpcApi):
    """Your sources; a team admin sees every source of the team."""

    write_scope = False
    Input = PaginationInput
    error_statuses = (400, 401, 403, 429)

    @extend_schema(responses=paginated_envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        page = list(selectors.source_list(user=request.user)[data["offset"] : data["offset"] + data["limit"]])
        for source in page:
            selectors.source_with_progress(source)
        body = {
            "data": page,
            "pagination": {
                "limit": data["limit"],
                "offset": data["offset"],
                "total": selectors.source_list(user=request.user).count(),
            },
        }
        return Response(paginated_envelope(SyncedSourceOutput)(body).data)


class SourceInfoApi(RpcApi):
    """One source, with its latest sync's progress and errors."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(SyncedSourceOutput, _shown(selectors.source_get(user=request.user, source_id=data["id"])))


class SourceSyncsApi(RpcApi):
    """A source's syncs, newest first: counts, errors, and the progress of the one in flight."""

    write_scope = False

    class Input(PaginationInput, IdInput):
        pass

    @extend_schema(responses=paginated_envelope(SyncOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        source = selectors.source_get(user=request.user, source_id=data["id"])
        syncs = selectors.source_syncs(user=request.user, source=source)
        return respond_page(SyncOutput, syncs, limit=data["limit"], offset=data["offset"])


class SourceCreateApi(RpcApi):
    """Add a source: its kind, configuration and secrets, the collection it writes into; its first sync starts at once."""

    write_scope = True

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(choices=sorted(KINDS))
        collectionId = serializers.UUIDField()
        config = serializers.DictField(required=False, default=dict, help_text="The kind's fields (sources.kinds).")
        secrets = serializers.DictField(
            child=serializers.CharField(allow_blank=True), required=False, default=dict, help_text=SECRETS_HELP
        )
        intervalMinutes = serializers.IntegerField(min_value=0, max_value=services.MAX_INTERVAL_MINUTES, default=60)
        publish = serializers.BooleanField(default=True)

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        collection = collection_get_to_change(user=request.user, collection_id=data["collectionId"])
        source = services.source_create(
            by=request.user,
            name=data["name"],
            kind=data["kind"],
            collection=collection,
            config=data["config"],
            secrets=data["secrets"],
            interval_minutes=data["intervalMinutes"],
            publish=data["publish"],
        )
        return respond(SyncedSourceOutput, _shown(source))


class SourceUpdateApi(RpcApi):
    """Change a source: what is sent changes. `secrets` are merged by name ("" removes one)."""

    write_scope = True

    class Input(IdInput):
        name = serializers.CharField(max_length=200, required=False)
        collectionId = serializers.UUIDField(required=False)
        config = serializers.DictField(required=False, help_text="Replaces the configuration.")
        secrets = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, help_text=SECRETS_HELP)
        intervalMinutes = serializers.IntegerField(min_value=0, max_value=services.MAX_INTERVAL_MINUTES, required=False)
        publish = serializers.BooleanField(required=False)

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        source = _changeable(request.user, data["id"])
        collection = None
        if "collectionId" in data:
            collection = collection_get_to_change(user=request.user, collection_id=data["collectionId"])
        source = services.source_update(
            source=source,
            by=request.user,
            name=data.get("name"),
            collection=collection,
            config=data.get("config"),
            secrets=data.get("secrets"),
            interval_minutes=data.get("intervalMinutes"),
            publish=data.get("publish"),
        )
        return respond(SyncedSourceOutput, _shown(source))


class SourceDeleteApi(RpcApi):
    """Delete a source; the documents it wrote stay in their collection."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        source = _shown(_changeable(request.user, data["id"]))
        body = envelope(SyncedSourceOutput)({"data": source}).data
        services.source_delete(source=source)
        return Response(body)


class SourceSyncApi(RpcApi):
    """Sync now: queue a sync (or return the one already queued or running)."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(SyncOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        sync = services.source_sync_request(source=_changeable(request.user, data["id"]))
        return respond(SyncOutput, sync)


class SourcePauseApi(RpcApi):
    """No scheduled syncs until resumed ("sync now" still works)."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(SyncedSourceOutput, _shown(services.source_pause(source=_changeable(request.user, data["id"]))))


class SourceResumeApi(RpcApi):
    """Scheduled syncs again."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(SyncedSourceOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(SyncedSourceOutput, _shown(services.source_resume(source=_changeable(request.user, data["id"]))))


class SourceUploadApi(RpcApi):
    """Upload a ZIP export (multipart `file`) to a ZIP source; it replaces the last one and is synced."""

    write_scope = True
    parser_classes = [MultiPartParser]
    error_statuses = (400, 401, 403, 404, 413, 429, 503)

    class Input(IdInput):
        file = serializers.FileField(help_text="The ZIP (multipart).")

    @extend_schema(request={"multipart/form-data": Input}, responses=envelope(SyncOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        limit = settings.IMPORT_MAX_REQUEST_SIZE
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise RequestTooLarge(f"The upload is larger than the {size_text(limit)} limit per request.")
        data = self.validated(request)
        sync = services.source_upload(source=_changeable(request.user, data["id"]), upload=data["file"])
        return respond(SyncOutput, sync)
