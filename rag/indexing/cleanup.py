"""Removal of embeddings no search can use: other models' chunks and deleted documents' chunks."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count

from rag.corpus.vector_index import drop_vector_indexes
from rag.indexing.graph_extraction import delete_orphan_entities
from rag.models import Chunk, IndexStatus, ServingModel


@dataclass
class CleanupReport:
    obsolete_models: dict[str, int]  # model id -> chunks
    orphaned_chunks: int
    orphaned_entities: int = 0
    # Models kept because teams are still searched with them (model id -> teams): a backfill is under way.
    still_serving: dict[str, int] = field(default_factory=dict)


@transaction.atomic
def cleanup_embeddings(*, dry_run: bool = False, keep_models: list[str] | None = None) -> CleanupReport:
    """Delete chunks (with their keyword postings, sign bits and graph facts) of models neither configured (nor the fallback), kept, nor searched by a team."""
    serving = dict(ServingModel.objects.values("model_id").annotate(teams=Count("pk")).values_list("model_id", "teams"))
    still_serving = {model_id: teams for model_id, teams in serving.items() if model_id != settings.RAG_EMBEDDING_MODEL}
    keep = set(keep_models or []) | {settings.RAG_EMBEDDING_MODEL} | set(serving)
    if settings.RAG_EMBEDDING_FALLBACK_MODEL:
        keep.add(settings.RAG_EMBEDDING_FALLBACK_MODEL)  # what it embedded during an outage waits to be embedded again
    obsolete = Chunk.objects.exclude(model_id__in=keep)
    per_model = dict(obsolete.order_by().values("model_id").annotate(n=Count("pk")).values_list("model_id", "n"))
    orphans = Chunk.objects.filter(document__deleted_at__isnull=False)
    orphan_count = orphans.count()
    entities = 0
    if not dry_run:
        gone = list(per_model)
        if gone:
            # In SQL, table by table: the ORM would load every chunk to cascade to its postings and facts.
            with connection.cursor() as cursor:
                for table in ("keyword_postings", "chunk_sign_bits", "graph_mentions", "graph_relations", "document_embeddings"):
                    cursor.execute(f"DELETE FROM {table} WHERE model_id = ANY(%s)", [gone])
        IndexStatus.objects.exclude(model_id__in=keep).delete()
        orphans.delete()
        # Graph facts went with those chunks; entities no chunk names any more go now.
        entities = delete_orphan_entities()
        drop_vector_indexes(keep=keep)
    return CleanupReport(
        obsolete_models=per_model, orphaned_chunks=orphan_count, orphaned_entities=entities, still_serving=still_serving
    )
