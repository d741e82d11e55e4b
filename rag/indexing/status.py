"""Index coverage of the documents a viewer can see, counted through the access policy."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

from documents.models import Document
from permissions.models import User
from rag.indexing.serving import Coverage, coverage
from rag.models import Chunk, IndexState, IndexStatus
from rag.retrieval.serving import configured_model, serving_model


@dataclass(frozen=True)
class IndexCoverage:
    model: str
    documents: int
    indexed: int
    pending: int
    failed: int
    chunks: int
    # While the team is searched with an earlier model: how far the configured one has come (else None).
    backfill: Coverage | None = None


def index_coverage(*, user: User) -> IndexCoverage:
    """Coverage of the documents the caller can see, for the model their searches use (and the one being built)."""
    model_id = serving_model(user.team_id).model_id
    visible = Document.objects.visible_to(user, include_archived=True)
    states = IndexStatus.objects.filter(document__in=visible, model_id=model_id).aggregate(
        indexed=Count("id", filter=Q(state=IndexState.INDEXED)),
        failed=Count("id", filter=Q(state=IndexState.FAILED)),
    )
    total = visible.count()
    backfill = coverage(visible, old=model_id) if model_id != configured_model().model_id else None
    return IndexCoverage(
        model=model_id,
        documents=total,
        indexed=states["indexed"],
        pending=total - states["indexed"] - states["failed"],
        failed=states["failed"],
        chunks=Chunk.objects.filter(document__in=visible, model_id=model_id).count(),
        backfill=backfill,
    )
