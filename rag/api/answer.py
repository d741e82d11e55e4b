"""rag.answer (JSON or Server-Sent Events) and rag.feedback."""
from __future__ import annotations

import time

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from rag.answering.answer import answer_complete, answer_events
from rag.answering.feedback import feedback_create
from rag.answering.passages import retrieve
from rag.api.base import QueryField, RagApi, StrictInt, rag_input
from rag.api.sse import EVENT_STREAM, EventStreamRenderer, sse_stream

CitationOutput = inline_serializer("AnswerCitation", {
    "n": serializers.IntegerField(),
    "document": inline_serializer("AnswerCitationDocument", {
        "id": serializers.UUIDField(), "title": serializers.CharField(), "url": serializers.CharField()}),
    "version": serializers.IntegerField(), "chunkIndex": serializers.IntegerField(),
    "start": serializers.IntegerField(), "end": serializers.IntegerField(),
    "score": serializers.FloatField(), "context": serializers.CharField(),
}, many=True)


class RagAnswerApi(RagApi):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    class Input(serializers.Serializer):
        query = QueryField()
        collectionId = serializers.UUIDField(required=False, allow_null=True)
        documentId = serializers.UUIDField(required=False, allow_null=True)
        limit = StrictInt(min_value=1, max_value=20, default=5)
        stream = serializers.BooleanField(default=False)

    @extend_schema(
        request=Input,
        responses={200: OpenApiResponse(
            response=inline_serializer("RagAnswerResponse", {"data": inline_serializer("RagAnswer", {
                "id": serializers.UUIDField(), "answer": serializers.CharField(), "citations": CitationOutput,
                "confidence": serializers.ChoiceField(choices=["high", "medium", "low", "insufficient"]),
                "mode": serializers.ChoiceField(choices=["generated", "extractive", "insufficient"]),
                "latency": serializers.DictField(child=serializers.FloatField()),
            })}),
            description="With `stream: true`: text/event-stream of `token`, `citation`, `metadata`, `done` "
                        "(the answer object above plus `html`) and, on failure, `error` events.",
        )},
    )
    def post(self, request):
        started = time.perf_counter()
        data = rag_input(self.Input, request)
        retrieval = retrieve(
            user=request.user, query=data["query"], limit=data["limit"],
            collection_id=data.get("collectionId"), document_id=data.get("documentId"), started=started,
        )
        if not data["stream"]:
            return Response({"data": answer_complete(user=request.user, retrieval=retrieval)})
        response = StreamingHttpResponse(
            sse_stream(answer_events(user=request.user, retrieval=retrieval)),
            content_type=f"{EVENT_STREAM}; charset=utf-8",
        )
        response["Cache-Control"] = "no-cache, no-transform"
        response["X-Accel-Buffering"] = "no"  # nginx and similar proxies: pass events through at once
        return response


class RagFeedbackApi(RagApi):
    class Input(serializers.Serializer):
        answerId = serializers.UUIDField()
        rating = StrictInt(min_value=1, max_value=5)
        comment = serializers.CharField(max_length=2000, allow_blank=True, default="")

    @extend_schema(request=Input, responses=inline_serializer("RagFeedbackResponse", {"data": inline_serializer("RagFeedback", {
        "id": serializers.IntegerField(), "answerId": serializers.UUIDField(), "rating": serializers.IntegerField(),
        "comment": serializers.CharField(), "createdAt": serializers.DateTimeField(),
    })}))
    def post(self, request):
        data = rag_input(self.Input, request)
        feedback = feedback_create(user=request.user, answer_id=data["answerId"], rating=data["rating"], comment=data["comment"])
        return Response({"data": {
            "id": feedback.pk, "answerId": str(feedback.query_log_id), "rating": feedback.rating,
            "comment": feedback.comment, "createdAt": feedback.created_at.isoformat(),
        }})
