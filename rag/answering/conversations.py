"""Conversations: a user's threads of answers, and each turn as its owner may see it now.

A conversation belongs to one user, who may rename or delete it; anyone else (the same team included)
gets `not_found`, as for a conversation that does not exist. Its turns are the QueryLog rows of its
answers; a regenerated answer takes the place of the turn it was asked for (`turn_save`'s `replaces`). A turn's answer
(and the question it was rewritten into) may quote documents, so it is shown only while its user can
still read every document it drew on (`QueryLog.source_documents`, checked through
`Document.objects.visible_to`); otherwise the turn keeps its question, the user's own words, and the
citations of the documents still readable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from config.errors import NotFound
from documents.models import Document
from permissions.models import User
from rag.answering.rendering import answer_html
from rag.models import Conversation, QueryLog

TITLE_LENGTH = 200  # Conversation.title's max_length


@dataclass(frozen=True)
class Turn:
    """One answered question of a conversation, as its owner may see it now."""

    id: uuid.UUID
    question: str
    # What was searched; None while withheld (a rewrite may carry words of the earlier answers).
    standalone_query: str | None
    answer: str | None  # None: withheld, a document it drew on is no longer readable
    citations: list[dict]  # only those of documents still readable
    confidence: str
    mode: str
    created_at: datetime
    sources: frozenset[uuid.UUID]

    @property
    def withheld(self) -> bool:
        return self.answer is None

    @property
    def html(self) -> str | None:
        return None if self.answer is None else answer_html(self.answer, {c["n"]: c for c in self.citations})


def _title(question: str) -> str:
    title = " ".join(question.split())
    return title if len(title) <= TITLE_LENGTH else title[: TITLE_LENGTH - 1] + "…"


def _cited_documents(citations: list[dict]) -> set[uuid.UUID]:
    return {uuid.UUID(c["document"]["id"]) for c in citations}


def conversation_list(*, user: User) -> QuerySet[Conversation]:
    """The user's own conversations, the most recently answered first, each with its `turn_count`."""
    if user.team_id is None:
        return Conversation.objects.none()
    return (
        Conversation.objects.filter(user_id=user.pk, team_id=user.team_id)
        .annotate(turn_count=Count("turns"))
        .order_by("-updated_at", "-id")
    )


def conversation_get(*, user: User, conversation_id: uuid.UUID) -> Conversation:
    """One of the user's own conversations; anyone else's is `not_found`, as a missing one is."""
    conversation = conversation_list(user=user).filter(pk=conversation_id).first()
    if conversation is None:
        raise NotFound("Conversation not found.")
    return conversation


@transaction.atomic
def conversation_update(*, user: User, conversation_id: uuid.UUID, title: str) -> Conversation:
    """Rename one of the user's conversations (spacing normalised); its turns and its place in the list stay."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    conversation.title = " ".join(title.split())
    conversation.full_clean()
    conversation.save(update_fields=["title"])
    return conversation


@transaction.atomic
def conversation_delete(*, user: User, conversation_id: uuid.UUID) -> Conversation:
    """Delete one of the user's conversations; its answers stay in the query log, unlinked (ratings, the admin)."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    Conversation.objects.filter(pk=conversation.pk).delete()
    return conversation


def conversation_turns(*, user: User, conversation: Conversation, last: int | None = None) -> list[Turn]:
    """The conversation's turns, oldest first (only the `last` ones when given), each withheld as the module says."""
    logs = QueryLog.objects.filter(conversation=conversation, user_id=user.pk).order_by("-created_at", "-id")
    rows = list(reversed(logs[:last] if last is not None else logs))
    drawn_on = {document for log in rows for document in {*log.source_documents, *_cited_documents(log.citations)}}
    readable = set(Document.objects.visible_to(user, include_archived=True).filter(pk__in=drawn_on).values_list("pk", flat=True))
    turns = []
    for log in rows:
        sources = frozenset({*log.source_documents, *_cited_documents(log.citations)})
        whole = sources <= readable
        turns.append(
            Turn(
                id=log.pk,
                question=log.query,
                standalone_query=(log.standalone_query or log.query) if whole else None,
                answer=log.answer if whole else None,
                citations=[c for c in log.citations if uuid.UUID(c["document"]["id"]) in readable],
                confidence=log.confidence,
                mode=log.mode,
                created_at=log.created_at,
                sources=sources,
            )
        )
    return turns


@dataclass(frozen=True)
class ConversationDetail:
    """A conversation with its turns, as its owner may see them now."""

    id: uuid.UUID
    title: str
    created_at: datetime
    updated_at: datetime
    turns: list[Turn]

    @property
    def turn_count(self) -> int:
        return len(self.turns)


def conversation_info(*, user: User, conversation_id: uuid.UUID) -> ConversationDetail:
    """One of the user's conversations with all its turns (`not_found` for anyone else's)."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    return ConversationDetail(
        id=conversation.pk,
        title=conversation.title,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        turns=conversation_turns(user=user, conversation=conversation),
    )


@transaction.atomic
def turn_save(*, log: QueryLog, conversation: Conversation | None, replaces: uuid.UUID | None = None) -> Conversation:
    """Save an answer as the newest turn of `conversation`, or of a new conversation it starts.

    `replaces` (a regenerated answer) is the turn it takes the place of: unlinked from the conversation,
    as a deleted conversation's answers are, so it stays in the query log with its feedback.
    """
    assert log.user_id is not None and log.team_id is not None, "a conversation's turns are a user's answers"
    now = timezone.now()
    # A conversation deleted while its follow-up was being answered: the answer starts a new one.
    if conversation is None or not Conversation.objects.filter(pk=conversation.pk, user_id=log.user_id).update(updated_at=now):
        conversation = Conversation(
            user_id=log.user_id, team_id=log.team_id, title=_title(log.query), created_at=now, updated_at=now
        )
        conversation.full_clean()
        conversation.save()
    elif replaces is not None:
        QueryLog.objects.filter(pk=replaces, conversation=conversation).update(conversation=None)
    log.conversation = conversation
    log.save()
    return conversation
