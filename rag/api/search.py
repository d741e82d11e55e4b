"""rag.search, rag.status and rag.embed."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.celery import BROKER_ERRORS
from config.errors import Forbidden, QueueUnavailable
from config.rpc import envelope, respond
from documents.apis import TAGS_FILTER_HELP, TagsField
from documents.selectors import document_get
from documents.tags import MAX_FILTER_TAGS
from permissions.http import AuthenticatedRequest
from permissions.policy import can_write_document
from rag.api.base import QueryField, RagApi, RoundedFloat, StrictFloat, StrictInt
from rag.indexing.index_status import index_coverage, mark_pending
from rag.retrieval.hits import chunk_ref
from rag.retrieval.search import MODES, SearchOutcome, search_request
from rag.tasks import enqueue_index


class SearchHitDocumentOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    url = serializers.CharField()
    collectionId = serializers.UUIDField(source="collection_id")
    updatedAt = serializers.DateTimeField(source="updated_at")


class SearchExplanationOutput(serializers.Serializer):
    """A `rag.retrieval.hits.Explanation`: the hit's rank and score in each ranking that found it (null where none did)."""

    vectorRank = serializers.IntegerField(
        source="places.vector.rank",
        allow_null=True,
        help_text="Its rank by cosine similarity among your visible passages (1 = best).",
    )
    vectorScore = RoundedFloat(source="places.vector.score", allow_null=True, help_text="Its cosine similarity to the query.")
    keywordRank = serializers.IntegerField(source="places.keyword.rank", allow_null=True, help_text="Its rank by BM25.")
    keywordScore = RoundedFloat(source="places.keyword.score", allow_null=True, help_text="Its BM25 score.")
    keywordRelevance = RoundedFloat(
        source="places.keyword.relevance",
        allow_null=True,
        help_text="BM25 on hybrid's 0-1 scale: against a passage holding every query word once.",
    )
    graphRank = serializers.IntegerField(
        source="places.graph.rank", allow_null=True, help_text="Its rank by the knowledge graph."
    )
    graphScore = RoundedFloat(
        source="places.graph.score", allow_null=True, help_text="Its graph activation (1 or more: a document the query names)."
    )
    fusedScore = RoundedFloat(source="fused", allow_null=True, help_text="Hybrid: the fused score (the hit's score).")
    contributions = serializers.DictField(
        child=RoundedFloat(),
        allow_null=True,
        help_text="Hybrid: what each ranking added to fusedScore (weight x relevance / sum of the weights); they sum to it.",
    )
    foundBy = serializers.ListField(
        source="found_by", child=serializers.CharField(), help_text="The rankings that found it: vector, keyword, graph."
    )


class SearchHitOutput(serializers.Serializer):
    """One ranked chunk (a `rag.retrieval.hits.RankedChunk`)."""

    id = serializers.SerializerMethodField(help_text="The chunk's id: `<documentId>:<version>:<chunkIndex>`.")
    document = SearchHitDocumentOutput()
    score = RoundedFloat(source="hit.score")
    # ignore: the API's field is named "context", which the stubs type as Field.context; a declared
    # field's attribute name is its JSON name, so no rename can keep it.
    context = serializers.CharField(allow_null=True, help_text="The chunk's text; null with includeContext false.")  # type: ignore[assignment]
    chunkIndex = serializers.IntegerField(source="hit.chunk_index")
    explain = SearchExplanationOutput(
        source="hit.explanation", required=False, help_text="With `explain: true` only: why the hit ranked where it did."
    )

    def get_id(self, ranked) -> str:
        return chunk_ref(ranked.document.id, ranked.hit.version, ranked.hit.chunk_index)

    def to_representation(self, instance):
        body = super().to_representation(instance)
        if instance.hit.explanation is None:
            del body["explain"]  # asked for only: the usual response stays as it was
        return body


class SearchPaginationOutput(serializers.Serializer):
    limit = serializers.IntegerField()
    # Not `total`: search ranks the best `limit` chunks and never counts every match (that would cost a full scan).
    count = serializers.IntegerField(help_text="How many results this response holds (at most `limit`).")


class RagSearchResponse(serializers.Serializer):
    # ignore: the API's envelope field is named "data", which the stubs type as Serializer.data; a
    # declared field's attribute name is its JSON name, so no rename can keep it.
    data = SearchHitOutput(many=True)  # type: ignore[assignment]
    pagination = SearchPaginationOutput()
    degraded = serializers.BooleanField(
        help_text="True when a hybrid search could not embed the query and ranked by keyword only (embedding_unavailable)."
    )


class RagSearchApi(RagApi):
    """Rank the chunks of the documents you may read: vector, keyword (BM25), graph, or hybrid (score-aware fusion of the three)."""

    write_scope = False
    replica_reads = True

    class Input(serializers.Serializer):
        query = QueryField()
        limit = StrictInt(min_value=1, max_value=50, default=10)
        threshold = StrictFloat(min_value=0.0, max_value=1.0, required=False)
        collectionId = serializers.UUIDField(required=False, allow_null=True)
        documentId = serializers.UUIDField(required=False, allow_null=True)
        includeContext = serializers.BooleanField(default=True)
        mode = serializers.ChoiceField(choices=MODES, default="hybrid")
        weights = serializers.ListField(
            child=StrictFloat(min_value=0.0, max_value=100.0),
            min_length=2,
            max_length=3,
            required=False,
            help_text="[vector, keyword] or [vector, keyword, graph] for hybrid.",
        )

        tags = TagsField(required=False, limit=MAX_FILTER_TAGS, help_text=TAGS_FILTER_HELP)
        explain = serializers.BooleanField(
            default=False, help_text="Add to each hit its rank and score in every ranking that found it, and the fused score."
        )
        includeGraph = serializers.BooleanField(
            default=True, help_text="false: hybrid ranks without the knowledge graph (its weight 0), whatever `weights` says."
        )

        def validate_weights(self, value: list[float]) -> list[float]:
            if not any(value):
                raise serializers.ValidationError("must not all be zero (every score would be 0, in no useful order).")
            return value

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if not attrs.get("includeGraph", True):
                if attrs.get("mode") == "graph":
                    raise serializers.ValidationError({"includeGraph": ["false cannot go with mode graph."]})
                weights = attrs.get("weights")
                if weights is not None and not any(weights[:2]):
                    raise serializers.ValidationError({"weights": ["without the graph, vector or keyword must weigh."]})
            return attrs

    @extend_schema(responses=RagSearchResponse)
    def post(self, request: AuthenticatedRequest) -> Response:
        return Response(search_response_body(search_request(user=request.user, **search_arguments(self.validated(request)))))


def search_arguments(data: dict[str, Any]) -> dict[str, Any]:
    """`RagSearchApi.Input`'s validated data as `search_request`'s arguments."""
    weights = tuple(data["weights"]) if data.get("weights") else None
    if not data.get("includeGraph", True):
        weights = (*(weights or settings.RAG_HYBRID_WEIGHTS)[:2], 0.0)
    return {
        "query": data["query"],
        "mode": data["mode"],
        "limit": data["limit"],
        "threshold": data.get("threshold"),
        "collection_id": data.get("collectionId"),
        "document_id": data.get("documentId"),
        "weights": weights,
        "tags": data.get("tags", []),
        "explain": data["explain"],
        "include_text": data["includeContext"],
    }


def search_response_body(outcome: SearchOutcome) -> dict[str, Any]:
    """rag.search's response body (the MCP search tool's result too)."""
    body = {
        "data": outcome.ranked,
        "pagination": {"limit": outcome.limit, "count": len(outcome.ranked)},
        "degraded": outcome.degraded,
    }
    # cast: the stubs read `.data` as the declared field named data (see RagSearchResponse), not the rendered body.
    return cast(dict[str, Any], RagSearchResponse(body).data)


class RagBackfillOutput(serializers.Serializer):
    model = serializers.CharField(help_text="The configured model being built beside the one searches use.")
    done = serializers.IntegerField(help_text="Documents it covers (of those the searched model covers).")
    total = serializers.IntegerField(help_text="Documents the searched model covers: when all are done, searches switch.")
    failed = serializers.IntegerField(help_text="Documents it failed on: they hold the switch back until reindexed.")


class RagStatusOutput(serializers.Serializer):
    model = serializers.CharField(help_text="The embedding model your searches use.")
    documents = serializers.IntegerField()
    indexed = serializers.IntegerField()
    pending = serializers.IntegerField()
    failed = serializers.IntegerField()
    chunks = serializers.IntegerField()
    backfill = RagBackfillOutput(
        allow_null=True,
        help_text="While a new embedding model is built for your team (searches keep the earlier one): its progress; else null.",
    )


class RagStatusApi(RagApi):
    """Index coverage of the documents you can see, for the embedding model your searches use."""

    write_scope = False

    @extend_schema(responses=envelope(RagStatusOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        self.validated(request)
        return respond(RagStatusOutput, index_coverage(user=request.user))


class RagEmbedOutput(serializers.Serializer):
    documentId = serializers.UUIDField()
    queued = serializers.BooleanField()


class RagEmbedApi(RagApi):
    """Queue a reindex of one document."""

    write_scope = True

    class Input(serializers.Serializer):
        documentId = serializers.UUIDField()

    @extend_schema(responses=envelope(RagEmbedOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        document = document_get(user=request.user, document_id=data["documentId"], include_archived=True)
        # Re-embedding costs the team's embedding budget: readers may not force it.
        if not can_write_document(request.user, document):
            raise Forbidden("You can read this document but not change it, so you cannot reindex it.")
        mark_pending(document_ids=[document.pk], model_id=settings.RAG_EMBEDDING_MODEL)
        try:
            enqueue_index(document.pk, force=True)
        except BROKER_ERRORS as exc:
            raise QueueUnavailable("The task queue cannot be reached, so the reindex was not queued; try again later.") from exc
        return respond(RagEmbedOutput, {"documentId": document.pk, "queued": True})
