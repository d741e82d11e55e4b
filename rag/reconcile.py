"""Find and fix missing, stale, failed and orphaned chunks for the current model."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db.models import Count, F, OuterRef, Q, Subquery

from documents.models import Document
from rag.models import DocumentEmbedding, IndexState, IndexStatus

BATCH = 64


@dataclass
class ReconcileReport:
    model_id: str
    missing: list = field(default_factory=list)
    stale: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    orphaned: list = field(default_factory=list)
    queued: int = 0

    def as_dict(self) -> dict:
        data = asdict(self)
        return {k: (len(v) if isinstance(v, list) else v) for k, v in data.items()}


def reconcile(*, fix: bool, model_id: str | None = None) -> ReconcileReport:
    from rag import indexing, tasks

    model_id = model_id or settings.RAG_EMBEDDING_MODEL
    report = ReconcileReport(model_id=model_id)
    live = Document.objects.filter(deleted_at__isnull=True)
    indexed_version = IndexStatus.objects.filter(document=OuterRef("pk"), model_id=model_id, state=IndexState.INDEXED)
    chunk_count = (
        DocumentEmbedding.objects.filter(document=OuterRef("pk"), model_id=model_id)
        .order_by().values("document").annotate(n=Count("id")).values("n")
    )
    rows = live.annotate(
        indexed_version=Subquery(indexed_version.values("indexed_version")[:1]),
        expected_chunks=Subquery(indexed_version.values("chunk_count")[:1]),
        chunks=Subquery(chunk_count),
    ).values_list("pk", "version", "indexed_version", "expected_chunks", "chunks")
    for pk, version, done_version, expected, actual in rows:
        if done_version is None:
            report.missing.append(pk)
        elif done_version != version or (expected or 0) != (actual or 0):
            report.stale.append(pk)
    report.failed = list(
        IndexStatus.objects.filter(model_id=model_id, state=IndexState.FAILED, document__deleted_at__isnull=True)
        .values_list("document_id", flat=True)
    )
    report.missing = [pk for pk in report.missing if pk not in set(report.failed)]
    # Chunks of another version than the document's, or of a deleted document.
    report.orphaned = list(
        DocumentEmbedding.objects.filter(model_id=model_id)
        .filter(Q(document__deleted_at__isnull=False) | ~Q(document_version=F("document__version")))
        .values_list("document_id", flat=True).distinct()
    )
    if fix:
        deleted = list(Document.objects.filter(pk__in=report.orphaned, deleted_at__isnull=False).values_list("pk", flat=True))
        if deleted:
            indexing.remove_document_chunks(document_ids=deleted)
        todo = list(dict.fromkeys(report.missing + report.stale + report.failed + [p for p in report.orphaned if p not in deleted]))
        for start in range(0, len(todo), BATCH):
            tasks.index_batch_task.delay([str(pk) for pk in todo[start : start + BATCH]], None, True)
        report.queued = len(todo)
    return report
