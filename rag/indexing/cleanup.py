"""Removal of embeddings no search can use: other models' chunks and deleted documents' chunks."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from rag.indexing.graph import delete_orphan_entities
from rag.models import Chunk, IndexStatus


@dataclass
class CleanupReport:
    obsolete_models: dict[str, int]  # model id -> chunks
    orphaned_chunks: int
    orphaned_entities: int = 0


@transaction.atomic
def cleanup_embeddings(*, dry_run: bool = False, keep_models: list[str] | None = None) -> CleanupReport:
    keep = set(keep_models or []) | {settings.RAG_EMBEDDING_MODEL}
    obsolete = Chunk.objects.exclude(model_id__in=keep)
    per_model = {}
    for model_id in obsolete.order_by().values_list("model_id", flat=True).distinct():
        per_model[model_id] = obsolete.filter(model_id=model_id).count()
    orphans = Chunk.objects.filter(document__deleted_at__isnull=False)
    orphan_count = orphans.count()
    entities = 0
    if not dry_run:
        obsolete.delete()
        IndexStatus.objects.exclude(model_id__in=keep).delete()
        orphans.delete()
        # Graph facts went with those chunks; entities no chunk names any more go now.
        entities = delete_orphan_entities()
    return CleanupReport(obsolete_models=per_model, orphaned_chunks=orphan_count, orphaned_entities=entities)
