"""Index coverage of the documents a viewer can see, counted through the access policy."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, F, Q

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


def documents_awaiting_index(document_ids: list) -> int:
    """How many of these documents are not yet indexed at their current version (nor failed) for the configured model.

    Import jobs ask this (documents.ingestion.jobs.register_index_probe) to move from indexing to done.
    """
    settled = IndexStatus.objects.filter(document_id__in=document_ids, model_id=settings.RAG_EMBEDDING_MODEL).filter(
        Q(state=IndexState.FAILED) | Q(state=IndexState.INDEXED, indexed_version__gte=F("document__version"))
    )
    return len(set(document_ids)) - settled.count()
