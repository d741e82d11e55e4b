"""rag.search, rag.status and rag.embed."""
from __future__ import annotations

import logging

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from config.errors import InvalidQuery, RagDisabled
from documents.selectors import document_get
from permissions.apis import validated
from rag import search as search_service
from rag import status as status_service
from rag.tasks import enqueue_index

logger = logging.getLogger("rag.search")


class RagApi(APIView):
    http_method_names = ["post", "options"]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "rag"

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not settings.RAG_ENABLED:
            raise RagDisabled("RAG is disabled on this server (RAG_ENABLED=false).")


def rag_input(serializer_class, request) -> dict:
    """Validate; any bad input to rag.* is `invalid_query` (400)."""
    try:
        return validated(serializer_class, request)
    except serializers.ValidationError as exc:
        from config.exceptions import _first_message

        raise InvalidQuery(_first_message(exc.detail)) from exc


class QueryField(serializers.CharField):
    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=True, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string.")
        value = super().to_internal_value(data)
        if len(value) < 3:
            raise serializers.ValidationError("must be at least 3 characters.")
        if len(value) > settings.RAG_MAX_QUERY_LENGTH:
            raise serializers.ValidationError(f"must be at most {settings.RAG_MAX_QUERY_LENGTH} characters.")
        if "\x00" in value:
            raise serializers.ValidationError("must not contain NUL characters.")
        return value


class StrictFloat(serializers.FloatField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise serializers.ValidationError("must be a number.")
        return super().to_internal_value(data)


class StrictInt(serializers.IntegerField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("must be an integer.")
        return super().to_internal_value(data)


class SearchHitOutput(serializers.Serializer):
    id = serializers.CharField()
    document = inline_serializer("SearchHitDocument", {
        "id": serializers.UUIDField(), "title": serializers.CharField(), "url": serializers.CharField(),
        "collectionId": serializers.UUIDField(), "updatedAt": serializers.DateTimeField(),
    })
    score = serializers.FloatField()
    context = serializers.CharField(allow_null=True)
    chunkIndex = serializers.IntegerField()


class RagSearchApi(RagApi):
    class Input(serializers.Serializer):
        query = QueryField()
        limit = StrictInt(min_value=1, max_value=50, default=10)
        threshold = StrictFloat(min_value=0.0, max_value=1.0, required=False)
        collectionId = serializers.UUIDField(required=False, allow_null=True)
        documentId = serializers.UUIDField(required=False, allow_null=True)
        includeContext = serializers.BooleanField(default=True)
        mode = serializers.ChoiceField(choices=search_service.MODES, default="hybrid")
        weights = serializers.ListField(child=StrictFloat(min_value=0.0, max_value=100.0), min_length=2, max_length=2, required=False)

    @extend_schema(request=Input, responses=inline_serializer("RagSearchResponse", {
        "data": SearchHitOutput(many=True),
        "pagination": inline_serializer("RagSearchPagination", {"limit": serializers.IntegerField(), "total": serializers.IntegerField()}),
    }))
    def post(self, request):
        data = rag_input(self.Input, request)
        result = search_service.search(
            user=request.user, query=data["query"], limit=data["limit"], threshold=data.get("threshold"),
            mode=data["mode"], collection_id=data.get("collectionId"), document_id=data.get("documentId"),
            weights=tuple(data["weights"]) if data.get("weights") else None,
        )
        items = []
        for hit in result.hits:
            document = result.documents.get(hit.document_id)
            if document is None:  # became invisible between ranking and loading
                continue
            items.append({
                "id": str(hit.chunk_id),
                "document": {"id": str(document.pk), "title": document.title, "url": document.url,
                             "collectionId": str(document.collection_id), "updatedAt": document.updated_at.isoformat()},
                "score": round(hit.score, 6),
                "context": hit.text if data["includeContext"] else None,
                "chunkIndex": hit.chunk_index,
            })
        logger.info(
            "rag.search mode=%s results=%d latency=%s%s", data["mode"], len(items), result.latency,
            f" query={data['query']!r}" if settings.RAG_LOG_QUERIES else "",
        )
        return Response({"data": items, "pagination": {"limit": data["limit"], "total": len(items)}})


class RagStatusApi(RagApi):
    @extend_schema(request=None, responses=inline_serializer("RagStatusResponse", {"data": inline_serializer("RagStatus", {
        "model": serializers.CharField(), "documents": serializers.IntegerField(), "indexed": serializers.IntegerField(),
        "pending": serializers.IntegerField(), "failed": serializers.IntegerField(), "chunks": serializers.IntegerField(),
    })}))
    def post(self, request):
        rag_input(serializers.Serializer, request)
        return Response({"data": status_service.team_index_status(user=request.user)})


class RagEmbedApi(RagApi):
    write_scope = True

    class Input(serializers.Serializer):
        documentId = serializers.UUIDField()

    @extend_schema(request=Input, responses=inline_serializer("RagEmbedResponse", {"data": inline_serializer("RagEmbed", {
        "documentId": serializers.UUIDField(), "queued": serializers.BooleanField()})}))
    def post(self, request):
        data = rag_input(self.Input, request)
        document = document_get(user=request.user, document_id=data["documentId"], include_archived=True)
        status_service.mark_pending_for(document=document)
        enqueue_index(document.pk, force=True)
        return Response({"data": {"documentId": str(document.pk), "queued": True}})
