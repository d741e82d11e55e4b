"""rag.answer (JSON or Server-Sent Events) and rag.feedback."""

from __future__ import annotations

import time
from typing import Any

from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from config.rpc import envelope, respond
from documents.apis import TAGS_FILTER_HELP, TagsField
from documents.tags import MAX_FILTER_TAGS
from permissions.authentication import may_write
from permissions.http import AuthenticatedRequest
from rag.answering.answer import MODES, answer_complete, answer_request
from rag.answering.feedback import feedback_create
from rag.api.base import QueryField, RagApi, RoundedFloat, StrictInt
from rag.api.sse import EVENT_STREAM, EventStreamRenderer, sse_stream
from rag.models import Confidence

# The answer flow (rag.answering.answer) describes an answer as events and an AnswerRecord; these
# serializers render their payloads, in the JSON response and in each streamed event.


class CitationDocumentOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    url = serializers.CharField()
    origin = serializers.CharField(
        allow_blank=True,
        default="",
        help_text="Where the original lives, for a document a source keeps in sync (a URL, path@commit); else empty.",
    )


class SpanOutput(serializers.Serializer):
    start = serializers.IntegerField()
    end = serializers.IntegerField()


class LinesOutput(serializers.Serializer):
    start = serializers.IntegerField()
    end = serializers.IntegerField()


class CitationOutput(serializers.Serializer):
    n = serializers.IntegerField(help_text="The number the answer cites as [n].")
    document = CitationDocumentOutput()
    version = serializers.IntegerField()
    chunkIndex = serializers.IntegerField()
    start = serializers.IntegerField(
        help_text="Character offset of the passage in that version's text: `context` is exactly the text from "
        "`start` to `end`, the matched chunk widened with its neighbours' text when it was cut mid-thought."
    )
    end = serializers.IntegerField()
    chunkStart = serializers.IntegerField(help_text="Offset of the matched chunk itself (equals `start` unless widened).")
    chunkEnd = serializers.IntegerField(help_text="End of the matched chunk itself (equals `end` unless widened).")
    score = RoundedFloat(help_text="The retrieval score (the reranker's when one ran).")
    # ignore: the API's field is named "context", which the stubs type as Field.context; a declared
    # field's attribute name is its JSON name, so no rename can keep it.
    context = serializers.CharField(help_text="The passage's text (what the answer read).")  # type: ignore[assignment]
    quote = SpanOutput(
        allow_null=True,
        help_text="The span of the sentence the answer quotes from the passage (an extractive answer), else of the "
        "matched chunk; the document page marks it. null in answers kept from before quotes were cited.",
    )
    page = serializers.IntegerField(
        allow_null=True, help_text="The page of the original PDF the quoted sentence is on; null for other sources."
    )
    lines = LinesOutput(
        allow_null=True,
        help_text="The lines of the version's text the quoted sentence is on (1-based, inclusive); null for a PDF.",
    )
    location = serializers.CharField(
        allow_null=True,
        help_text="Where the quote is, as `path:start-end` (lines) or `path#page=N` (PDF); `path` is the imported "
        "file's path, or the document's title when it was not imported.",
    )


class ConfidenceFactorsOutput(serializers.Serializer):
    topSimilarity = RoundedFloat(
        allow_null=True, help_text="The best cosine similarity to the question among the passages the answer rests on."
    )
    threshold = serializers.FloatField(help_text="The evidence threshold (RAG_ANSWER_MIN_SCORE).")
    strength = RoundedFloat(help_text="How far the best passage clears the threshold, as a share of the room above it (0-1).")
    supportingPassages = serializers.IntegerField(help_text="Passages at or above the threshold (of those you may read).")
    supportingDocuments = serializers.IntegerField(help_text="Distinct documents among the supporting passages.")
    newestVersionAgeDays = serializers.FloatField(
        allow_null=True, help_text="Age in days of the most recent supporting document version (its updatedAt)."
    )
    staleAfterDays = serializers.IntegerField(help_text="RAG_ANSWER_STALE_DAYS: older evidence lowers the level (0: off).")
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Each step of the rule that set the level.")


CONVERSATION_ID_HELP = (
    "The conversation this answer is the newest turn of: send it back with a follow-up question. "
    "null for a read-scoped token, whose answers are kept in no conversation."
)
STANDALONE_QUERY_HELP = "The question as searched: a follow-up rewritten to stand alone from the earlier turns."


class RankingsOutput(serializers.Serializer):
    vector = serializers.IntegerField(help_text="Passages the vector ranking found.")
    keyword = serializers.IntegerField(help_text="Passages the keyword (BM25) ranking found.")
    graph = serializers.IntegerField(help_text="Passages the knowledge graph ranking found (0 without it).")


class TokensOutput(serializers.Serializer):
    prompt = serializers.IntegerField(help_text="Tokens of the prompt the LLM was given.")
    completion = serializers.IntegerField(help_text="Tokens the LLM wrote.")


FAST_PATH_HELP = (
    "true: an LLM is configured, but the extractive answer was confident enough "
    "(RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE) to be given without it."
)
RANKINGS_HELP = "How many of the answer's passages each ranking of hybrid search found (a passage may count in several)."
TOKENS_HELP = "The LLM's token counts for this answer; null when no LLM wrote it (extractive, fast path, cached)."


class AnswerOutput(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField(allow_null=True, help_text=CONVERSATION_ID_HELP)
    standaloneQuery = serializers.CharField(help_text=STANDALONE_QUERY_HELP)
    answer = serializers.CharField()
    citations = CitationOutput(many=True)
    confidence = serializers.ChoiceField(choices=Confidence.values)
    confidenceFactors = ConfidenceFactorsOutput(help_text="Why the answer has its confidence.")
    mode = serializers.ChoiceField(choices=MODES)
    cached = serializers.BooleanField(
        help_text="Served from the answer cache (a repeated question); `latency` then has `cacheMs`."
    )
    fastPath = serializers.BooleanField(help_text=FAST_PATH_HELP)
    rankings = RankingsOutput(help_text=RANKINGS_HELP)
    tokens = TokensOutput(allow_null=True, help_text=TOKENS_HELP)
    latency = serializers.DictField(child=serializers.FloatField())


class AnswerStreamDoneOutput(AnswerOutput):
    html = serializers.CharField(help_text="The answer rendered as sanitised HTML with citation links.")


class TokenOutput(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False)


class AnswerMetadataOutput(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField(allow_null=True, help_text=CONVERSATION_ID_HELP)
    standaloneQuery = serializers.CharField(help_text=STANDALONE_QUERY_HELP)
    confidence = serializers.ChoiceField(choices=Confidence.values)
    confidenceFactors = ConfidenceFactorsOutput()
    mode = serializers.ChoiceField(choices=MODES)
    cached = serializers.BooleanField()
    fastPath = serializers.BooleanField(help_text=FAST_PATH_HELP)
    rankings = RankingsOutput(help_text=RANKINGS_HELP)
    tokens = TokensOutput(allow_null=True, help_text=TOKENS_HELP)
    passages = serializers.IntegerField()
    latency = serializers.DictField(child=serializers.FloatField())


STREAM_OUTPUTS: dict[str, type[serializers.Serializer]] = {
    "token": TokenOutput,
    "citation": CitationOutput,
    "metadata": AnswerMetadataOutput,
    "done": AnswerStreamDoneOutput,
}


class RagAnswerApi(RagApi):
    """A question answered from the passages you may read, with citations the server maps to documents."""

    # A read: a read-scoped token's answer is logged but kept in no conversation (answer_request's `keep`).
    write_scope = False
    replica_reads = True
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    class Input(serializers.Serializer):
        query = QueryField()
        collectionId = serializers.UUIDField(required=False, allow_null=True)
        documentId = serializers.UUIDField(required=False, allow_null=True)
        limit = StrictInt(min_value=1, max_value=20, default=5)
        stream = serializers.BooleanField(default=False)
        tags = TagsField(required=False, limit=MAX_FILTER_TAGS, help_text=TAGS_FILTER_HELP)
        conversationId = serializers.UUIDField(
            required=False,
            allow_null=True,
            help_text="A conversation of yours to continue (from an earlier answer); absent, the answer starts a new one. "
            "Continuing one needs the write scope.",
        )
        sessionId = serializers.UUIDField(
            required=False, allow_null=True, help_text="Another name for `conversationId` (send one of the two)."
        )
        includeGraph = serializers.BooleanField(
            default=True,
            help_text="false: the knowledge graph neither ranks the passages nor connects them for this answer.",
        )
        fresh = serializers.BooleanField(
            default=False,
            help_text="true: answer afresh, not from the answer cache (regenerate); the new answer replaces the cached one.",
        )
        replaces = serializers.UUIDField(
            required=False,
            allow_null=True,
            help_text="Regenerate: the id of the newest answer of `conversationId`, which this answer takes the place of. "
            "The question is answered with the turns before it; once complete, the replaced answer leaves the "
            "conversation (it stays in the query log with its feedback).",
        )

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            session_id = attrs.pop("sessionId", None)
            conversation_id = attrs.get("conversationId")
            if session_id and conversation_id and session_id != conversation_id:
                raise serializers.ValidationError({"sessionId": ["names another conversation than conversationId."]})
            attrs["conversationId"] = conversation_id or session_id
            return attrs

    @extend_schema(
        responses={
            200: OpenApiResponse(
                response=envelope(AnswerOutput),
                description="With `stream: true`: text/event-stream of `token`, `citation`, `metadata`, `done` "
                "(the answer object above plus `html`) and, on failure, `error` events.",
            )
        },
    )
    def post(self, request: AuthenticatedRequest) -> HttpResponseBase:
        started = time.perf_counter()
        data = self.validated(request)
        events = answer_request(user=request.user, started=started, keep=may_write(request), **answer_arguments(data))
        if not data["stream"]:
            return respond(AnswerOutput, answer_complete(events).body())
        response = StreamingHttpResponse(sse_stream(events, STREAM_OUTPUTS), content_type=f"{EVENT_STREAM}; charset=utf-8")
        response["Cache-Control"] = "no-cache, no-transform"
        response["X-Accel-Buffering"] = "no"  # nginx and similar proxies: pass events through at once
        return response


def answer_arguments(data: dict[str, Any]) -> dict[str, Any]:
    """`RagAnswerApi.Input`'s validated data as `answer_request`'s arguments (the MCP answer tool's too)."""
    return {
        "query": data["query"],
        "conversation_id": data.get("conversationId"),
        "limit": data["limit"],
        "collection_id": data.get("collectionId"),
        "document_id": data.get("documentId"),
        "tags": data.get("tags", []),
        "fresh": data.get("fresh", False),
        "replaces": data.get("replaces"),
        "include_graph": data.get("includeGraph", True),
    }


class FeedbackOutput(serializers.Serializer):
    id = serializers.UUIDField()
    answerId = serializers.UUIDField(source="query_log_id")
    rating = serializers.IntegerField()
    comment = serializers.CharField(allow_blank=True)
    createdAt = serializers.DateTimeField(source="created_at")


class RagFeedbackApi(RagApi):
    """Rate one of your own answers; rating it again replaces your rating and comment."""

    write_scope = True

    class Input(serializers.Serializer):
        answerId = serializers.UUIDField()
        rating = StrictInt(min_value=1, max_value=5)
        comment = serializers.CharField(max_length=2000, allow_blank=True, default="")

    @extend_schema(responses=envelope(FeedbackOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        feedback = feedback_create(user=request.user, answer_id=data["answerId"], rating=data["rating"], comment=data["comment"])
        return respond(FeedbackOutput, feedback)
