"""Index coverage of the documents a viewer can see, counted through the access policy."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q

from documents.models import Document
from permissions.models import User
from rag.models import Chunk, IndexState, IndexStatus


@dataclass(frozen=True)
class IndexCoverage:
    model: str
    documents: int
    indexed: int
    pending: int
    failed: int
    chunks: int


def index_coverage(*, user: User) -> IndexCoverage:
    """Coverage of the documents the caller can see, for the configured model."""
    model_id = settings.RAG_EMBEDDING_MODEL
    visible = Document.objects.visible_to(user, include_archived=True)
    states = IndexStatus.objects.filter(document__in=visible, model_id=model_id).aggregate(
        indexed=Count("id", filter=Q(state=IndexState.INDEXED)),
        failed=Count("id", filter=Q(state=IndexState.FAILED)),
    )
    total = visible.count()
    return IndexCoverage(
        model=model_id,
        documents=total,
        indexed=states["indexed"],
        pending=total - states["indexed"] - states["failed"],
        failed=states["failed"],
        chunks=Chunk.objects.filter(document__in=visible, model_id=model_id).count(),
    )
