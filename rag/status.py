"""Index coverage for a team, counted through the visibility rules' team scope."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Q

from documents.models import Document
from permissions.models import User
from rag.indexing import mark_pending
from rag.models import DocumentEmbedding, IndexState, IndexStatus


def team_index_status(*, user: User) -> dict:
    """Coverage of the documents the caller can see, for the configured model."""
    model_id = settings.RAG_EMBEDDING_MODEL
    visible = Document.objects.visible_to(user, include_archived=True)
    states = IndexStatus.objects.filter(document__in=visible, model_id=model_id).aggregate(
        indexed=Count("id", filter=Q(state=IndexState.INDEXED)),
        failed=Count("id", filter=Q(state=IndexState.FAILED)),
    )
    total = visible.count()
    return {
        "model": model_id,
        "documents": total,
        "indexed": states["indexed"],
        "pending": total - states["indexed"] - states["failed"],
        "failed": states["failed"],
        "chunks": DocumentEmbedding.objects.filter(document__in=visible, model_id=model_id).count(),
    }


def mark_pending_for(*, document: Document) -> None:
    mark_pending(document_ids=[document.pk], model_id=settings.RAG_EMBEDDING_MODEL)
