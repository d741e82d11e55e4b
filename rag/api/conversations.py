"""conversations.list, .info, .update and .delete: your own conversations, never anyone else's."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.rpc import IdInput, PaginationInput, envelope, paginated_envelope, respond, respond_page
from permissions.http import AuthenticatedRequest
from rag.answering.answer import MODES
from rag.answering.conversations import (
    TITLE_LENGTH,
    conversation_delete,
    conversation_info,
    conversation_list,
    conversation_update,
)
from rag.api.answer import CitationOutput
from rag.api.base import RagApi
from rag.models import Confidence


class ConversationOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(help_text="The first question, shortened, unless renamed (conversations.update).")
    turnCount = serializers.IntegerField(source="turn_count", help_text="How many questions were answered in it.")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at", help_text="When its last turn was answered.")


class TurnOutput(serializers.Serializer):
    id = serializers.UUIDField(help_text="The answer's id (rag.feedback's answerId).")
    question = serializers.CharField(help_text="The question as it was asked.")
    standaloneQuery = serializers.CharField(
        source="standalone_query", allow_null=True, help_text="The question as searched; null when withheld."
    )
    answer = serializers.CharField(allow_null=True, allow_blank=True, help_text="null when withheld.")
    html = serializers.CharField(
        allow_null=True, allow_blank=True, help_text="The answer as sanitised HTML with citation links; null when withheld."
    )
    citations = CitationOutput(many=True, help_text="Citations of the documents you can still read.")
    confidence = serializers.ChoiceField(choices=Confidence.values)
    mode = serializers.ChoiceField(choices=MODES)
    withheld = serializers.BooleanField(
        help_text="true when a document the answer drew on is no longer readable to you: the question stays, its answer "
        "is not shown and its citations of unreadable documents are dropped."
    )
    createdAt = serializers.DateTimeField(source="created_at")


class ConversationDetailOutput(ConversationOutput):
    turns = TurnOutput(many=True, help_text="Oldest first.")


class ConversationListApi(RagApi):
    """Your conversations, the most recently answered first."""

    write_scope = False
    Input = PaginationInput

    @extend_schema(responses=paginated_envelope(ConversationOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond_page(ConversationOutput, conversation_list(user=request.user), limit=data["limit"], offset=data["offset"])


class ConversationInfoApi(RagApi):
    """One of your conversations with its turns; anyone else's is not_found."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(ConversationDetailOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(ConversationDetailOutput, conversation_info(user=request.user, conversation_id=data["id"]))


class ConversationUpdateApi(RagApi):
    """Rename one of your conversations; anyone else's is not_found."""

    write_scope = True

    class Input(IdInput):
        title = serializers.CharField(
            max_length=TITLE_LENGTH, help_text="The new title (spacing is normalised; it may not be blank)."
        )

    @extend_schema(responses=envelope(ConversationOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(
            ConversationOutput, conversation_update(user=request.user, conversation_id=data["id"], title=data["title"])
        )


class ConversationDeleteApi(RagApi):
    """Delete one of your conversations (its answers stay in the operator's query log, unlinked)."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(ConversationOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(ConversationOutput, conversation_delete(user=request.user, conversation_id=data["id"]))
