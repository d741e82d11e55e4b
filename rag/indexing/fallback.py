"""Embedding again, with the configured model, what the fallback model embedded while the configured one failed.

The fallback's chunks keep a document searchable during an outage (rag.retrieval.search ranks them
with the fallback model, apart from the configured model's), but a page merged from two models'
rankings is a stopgap, and the fallback is usually the weaker model. So a periodic task (rag.tasks.reembed_fallback_task, every RAG_EMBEDDING_FALLBACK_RETRY_INTERVAL) tries
the configured model on them, a batch at a time, without falling back again. The first batch is the
probe: when the configured model still fails on all of it, the pass stops and the next one tries
again. Each successful swap drops the document's fallback chunks in its own transaction
(rag.indexing.pipeline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from documents.models import Document
from rag.corpus.serving_model import fallback_model
from rag.indexing.index_status import UNSETTLED
from rag.indexing.pipeline import index_documents
from rag.models import IndexStatus

logger = logging.getLogger("rag.indexing")

# Documents per batch, and batches per pass: a pass stays well inside a task's time limit, the next goes on.
REEMBED_BATCH = 32
REEMBED_BATCHES_PER_PASS = 10


@dataclass(frozen=True)
class ReembedResult:
    reembedded: int  # documents the configured model now indexes
    failed: int  # documents it failed on again (they keep the fallback's chunks)
    left: int  # documents still served by the fallback after the pass


def fallback_documents() -> QuerySet[Document]:
    """Live documents the fallback model has indexed and the configured model has not replaced yet, not being indexed now.

    Those the configured model tried least recently come first: one it keeps refusing (a permanent
    error) goes to the back rather than filling every pass's first batch.
    """
    model = fallback_model()
    if model is None:
        return Document.objects.none()
    configured = IndexStatus.objects.filter(document_id=OuterRef("pk"), model_id=settings.RAG_EMBEDDING_MODEL)
    lease_start = timezone.now() - timedelta(seconds=settings.RAG_INDEX_LEASE)
    busy = configured.filter(state__in=UNSETTLED, updated_at__gte=lease_start)
    return (
        Document.objects.filter(deleted_at__isnull=True, index_statuses__model_id=model.model_id)
        .exclude(Exists(busy))
        .annotate(tried_at=Subquery(configured.values("updated_at")[:1]))
        .order_by(F("tried_at").asc(nulls_first=True), "pk")
    )


def reembed_fallback_documents() -> ReembedResult:
    """One pass: the configured model embeds the fallback's documents, batch by batch, until one fails whole."""
    reembedded = failed = 0
    tried: set = set()
    for _ in range(REEMBED_BATCHES_PER_PASS):
        ids = list(fallback_documents().exclude(pk__in=tried).values_list("pk", flat=True)[:REEMBED_BATCH])
        if not ids:
            break
        tried.update(ids)
        result = index_documents(document_ids=ids)
        reembedded += len(result.indexed) + len(result.skipped)
        failed += len(result.failed)
        if len(result.failed) == len(ids):
            logger.info("the configured embedding model still fails: %d document(s) stay with the fallback", len(ids))
            break
    left = fallback_documents().count()
    if reembedded:
        logger.info("%d document(s) embedded again with the configured model, %d left with the fallback", reembedded, left)
    return ReembedResult(reembedded=reembedded, failed=failed, left=left)
