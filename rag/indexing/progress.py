"""How far the index has caught up with given documents: import jobs ask it to move from indexing to done."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F, Q

from rag.models import IndexState, IndexStatus


def documents_awaiting_index(document_ids: list) -> int:
    """How many of these documents are not yet indexed at their current version (nor failed) for the configured model.

    Registered with documents.ingestion.jobs.register_index_probe (documents may not import rag). With
    RAG_ENABLED=false none: nothing indexes them until the feature is on again, so an import does not wait.
    """
    if not settings.RAG_ENABLED:
        return 0
    settled = IndexStatus.objects.filter(document_id__in=document_ids, model_id=settings.RAG_EMBEDDING_MODEL).filter(
        Q(state=IndexState.FAILED) | Q(state=IndexState.INDEXED, indexed_version__gte=F("document__version"))
    )
    return len(set(document_ids)) - settled.count()
