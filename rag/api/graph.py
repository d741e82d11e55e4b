"""graph.entities, graph.entity and graph.passage: explore the knowledge graph, through the viewer's visible documents."""

from __future__ import annotations

import re
import uuid

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.rpc import PaginationOutput, envelope, respond
from permissions.http import AuthenticatedRequest
from rag.api.base import RagApi, StrictInt
from rag.retrieval.explore import entity_get, entity_list, passage_get


class EntityOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField(
        help_text="document (a title), name, topic or code; with the llm extractor also person, organization, location, "
        "product, technology, concept or event."
    )
    mentions = serializers.IntegerField(help_text="Chunks you can read that name it.")
    documents = serializers.IntegerField(help_text="Documents you can read that name it.")


class GraphEntitiesResponse(serializers.Serializer):
    data = EntityOutput(many=True)  # type: ignore[assignment]  # the JSON field is named data
    pagination = PaginationOutput()


class GraphEntitiesApi(RagApi):
    """Find entities by name; every count is of passages you can read."""

    write_scope = False
    replica_reads = True

    class Input(serializers.Serializer):
        query = serializers.CharField(max_length=200, allow_blank=True, default="", trim_whitespace=True)
        limit = StrictInt(min_value=1, max_value=100, default=25)
        offset = StrictInt(min_value=0, max_value=100_000, default=0)

    @extend_schema(responses=GraphEntitiesResponse)
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        entities, total = entity_list(user=request.user, query=data["query"], limit=data["limit"], offset=data["offset"])
        body = {"data": entities, "pagination": {"limit": data["limit"], "offset": data["offset"], "total": total}}
        return Response(GraphEntitiesResponse(body).data)


class NeighbourOutput(serializers.Serializer):
    entity = EntityOutput()
    predicate = serializers.CharField()
    direction = serializers.ChoiceField(choices=["out", "in"], help_text="out: this entity -> neighbour.")
    confidence = serializers.FloatField()
    weight = serializers.FloatField()
    chunkId = serializers.CharField(
        source="chunk", help_text="The passage the relation was read from: `<documentId>:<version>:<chunkIndex>`."
    )


class EntityPassageOutput(serializers.Serializer):
    chunkId = serializers.CharField(source="chunk", help_text="`<documentId>:<version>:<chunkIndex>`.")
    documentId = serializers.UUIDField(source="document_id")
    title = serializers.CharField()
    chunkIndex = serializers.IntegerField(source="chunk_index")
    text = serializers.CharField()


class EntityDetailOutput(serializers.Serializer):
    entity = EntityOutput()
    neighbours = NeighbourOutput(many=True)
    passages = EntityPassageOutput(many=True)


class GraphEntityApi(RagApi):
    """One entity: its neighbours (relations with predicate and confidence) and the passages that name it."""

    write_scope = False
    replica_reads = True

    class Input(serializers.Serializer):
        id = serializers.UUIDField()
        limit = StrictInt(min_value=1, max_value=100, default=25)

    @extend_schema(responses=envelope(EntityDetailOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(EntityDetailOutput, entity_get(user=request.user, entity_id=data["id"], limit=data["limit"]))


class ChunkRefField(serializers.CharField):
    """A passage as clients see it, `<documentId>:<version>:<chunkIndex>`, read into its three parts."""

    pattern = re.compile(
        r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):([0-9]{1,9}):([0-9]{1,9})", re.IGNORECASE
    )

    def to_internal_value(self, data):
        match = self.pattern.fullmatch(super().to_internal_value(data))
        if match is None:
            raise serializers.ValidationError("must be a passage id, `<documentId>:<version>:<chunkIndex>`.")
        return uuid.UUID(match.group(1)), int(match.group(2)), int(match.group(3))


class PassageOutput(serializers.Serializer):
    chunkId = serializers.CharField(source="chunk", help_text="`<documentId>:<version>:<chunkIndex>`.")
    documentId = serializers.UUIDField(source="document_id")
    title = serializers.CharField()
    version = serializers.IntegerField()
    chunkIndex = serializers.IntegerField(source="chunk_index")
    start = serializers.IntegerField(help_text="Where the passage starts in that version's text (characters).")
    end = serializers.IntegerField()
    text = serializers.CharField()


class GraphPassageApi(RagApi):
    """The passage a relation was read from (a neighbour's `chunkId`), with where it sits in its document."""

    write_scope = False
    replica_reads = True

    class Input(serializers.Serializer):
        chunkId = ChunkRefField(max_length=100)

    @extend_schema(responses=envelope(PassageOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        document_id, version, chunk_index = self.validated(request)["chunkId"]
        return respond(
            PassageOutput, passage_get(user=request.user, document_id=document_id, version=version, chunk_index=chunk_index)
        )
