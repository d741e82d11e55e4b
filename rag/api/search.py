"""rag.search, rag.status and rag.embed."""
from __future__ import annotations

import logging

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from documents.selectors import document_get
from rag.api.base import QueryField, RagApi, StrictFloat, StrictInt, rag_input
from rag.indexing.state import mark_pending
from rag.indexing.status import index_coverage
from rag.retrieval.search import MODES, search
from rag.tasks import enqueue_index

logger = logging.getLogger("rag.search")


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
        mode = serializers.ChoiceField(choices=MODES, default="hybrid")
        weights = serializers.ListField(child=StrictFloat(min_value=0.0, max_value=100.0), min_length=2, max_length=2, required=False)

    @extend_schema(request=Input, responses=inline_serializer("RagSearchResponse", {
        "data": SearchHitOutput(many=True),
        "pagination": inline_serializer("RagSearchPagination", {"limit": serializers.IntegerField(), "total": serializers.IntegerField()}),
    }))
    def post(self, request):
        data = rag_input(self.Input, request)
        result = search(
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
        return Response({"data": vars(index_coverage(user=request.user))})


class RagEmbedApi(RagApi):
    write_scope = True

    class Input(serializers.Serializer):
        documentId = serializers.UUIDField()

    @extend_schema(request=Input, responses=inline_serializer("RagEmbedResponse", {"data": inline_serializer("RagEmbed", {
        "documentId": serializers.UUIDField(), "queued": serializers.BooleanField()})}))
    def post(self, request):
        data = rag_input(self.Input, request)
        document = document_get(user=request.user, document_id=data["documentId"], include_archived=True)
        mark_pending(document_ids=[document.pk], model_id=settings.RAG_EMBEDDING_MODEL)
        enqueue_index(document.pk, force=True)
        return Response({"data": {"documentId": str(document.pk), "queued": True}})
