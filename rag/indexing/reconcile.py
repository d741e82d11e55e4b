"""Find missing, stale, failed and orphaned chunks for a model, and say what would repair them.

`reconcile` only reads: the caller (rag.tasks.repair_index) removes and enqueues what the report lists. With the
milvus backend, `milvus_drift` compares Milvus's copy of the vectors with the chunks, and `milvus_repair` queues
what differs in the outbox (rag.indexing.vector_outbox), whose drain writes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import CharField, Count, F, FilteredRelation, Func, OuterRef, Q, Subquery
from django.utils import timezone

from documents.models import Document
from rag.corpus import milvus
from rag.corpus.names import entity_key, is_meaningful_key
from rag.indexing.index_status import WORKING, lost_from
from rag.indexing.model_switch import documents_lacking_configured_model
from rag.indexing.vector_outbox import outbox_enqueue
from rag.models import Chunk, IndexState, IndexStatus, Mention, ServingModel


class TextHash(Func):
    """SHA-256 (hex) of a text column's UTF-8 bytes, in SQL: what rag.indexing.pipeline.content_hash computes."""

    template = "encode(sha256(convert_to(%(expressions)s, 'UTF8')), 'hex')"
    output_field = CharField()


@dataclass
class ReconcileReport:
    model_id: str
    missing: list[uuid.UUID] = field(default_factory=list)
    stale: list[uuid.UUID] = field(default_factory=list)
    failed: list[uuid.UUID] = field(default_factory=list)
    orphaned: list[uuid.UUID] = field(default_factory=list)
    # Indexed, but the current chunks carry no graph facts (indexed before the graph, or a lost write).
    without_graph: list[uuid.UUID] = field(default_factory=list)
    # Missing or stale, of teams still searched with an earlier model: the backfill's work, not the repair's.
    backfill: list[uuid.UUID] = field(default_factory=list)
    # The repair: deleted documents whose chunks go, and documents to index again.
    to_remove: list[uuid.UUID] = field(default_factory=list)
    to_reindex: list[uuid.UUID] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        names = ("missing", "stale", "failed", "orphaned", "without_graph", "backfill")
        return {name: len(getattr(self, name)) for name in names}


def reconcile(*, model_id: str | None = None) -> ReconcileReport:
    model_id = model_id or settings.RAG_EMBEDDING_MODEL
    report = ReconcileReport(model_id=model_id)
    live = Document.objects.filter(deleted_at__isnull=True)
    indexed_version = IndexStatus.objects.filter(document=OuterRef("pk"), model_id=model_id, state=IndexState.INDEXED)
    chunk_count = (
        Chunk.objects.filter(document=OuterRef("pk"), model_id=model_id)
        .order_by()
        .values("document")
        .annotate(n=Count("id"))
        .values("n")
    )
    rows = (
        live.annotate(
            indexed_version=Subquery(indexed_version.values("indexed_version")[:1]),
            indexed_text_hash=Subquery(indexed_version.values("indexed_text_hash")[:1]),
            expected_chunks=Subquery(indexed_version.values("chunk_count")[:1]),
            chunk_rows=Subquery(chunk_count),
        )
        # The text itself, not only its version: a write that bypassed the services (a raw UPDATE, a script)
        # made no new version, yet its chunks are of another text.
        .annotate(same_text=Q(indexed_text_hash=TextHash("text")))
        .values_list("pk", "version", "indexed_version", "same_text", "expected_chunks", "chunk_rows")
    )
    for pk, version, done_version, same_text, expected, actual in rows:
        if done_version is None:
            report.missing.append(pk)
        elif done_version != version or not same_text or (expected or 0) != (actual or 0):
            report.stale.append(pk)
    report.failed = list(
        IndexStatus.objects.filter(model_id=model_id, state=IndexState.FAILED, document__deleted_at__isnull=True).values_list(
            "document_id", flat=True
        )
    )
    failed = set(report.failed)
    report.missing = [pk for pk in report.missing if pk not in failed]
    if model_id == settings.RAG_EMBEDDING_MODEL:
        # Queued here, a backfill's documents would wait in the queue beside its own steps.
        behind = set(documents_lacking_configured_model().values_list("pk", flat=True))
        report.backfill = [pk for pk in report.missing + report.stale if pk in behind]
        report.missing = [pk for pk in report.missing if pk not in behind]
        report.stale = [pk for pk in report.stale if pk not in behind]
    # Chunks of another version than the document's, or of a deleted document.
    report.orphaned = list(
        Chunk.objects.filter(model_id=model_id)
        .filter(Q(document__deleted_at__isnull=False) | ~Q(document_version=F("document__version")))
        .values_list("document_id", flat=True)
        .distinct()
    )
    if settings.RAG_GRAPH_ENABLED:
        # Every chunk of a document with a meaningful title is the subject of that title.
        bare = (
            Document.objects.filter(deleted_at__isnull=True, chunks__model_id=model_id, chunks__document_version=F("version"))
            .exclude(chunks__in=Mention.objects.filter(subject=True, model_id=model_id).values("chunk_id"))
            .values_list("pk", "title")
            .distinct()
        )
        stale = set(report.stale)
        report.without_graph = [pk for pk, title in bare if is_meaningful_key(entity_key(title)) and pk not in stale]
    report.to_remove = list(
        Document.objects.filter(pk__in=report.orphaned, deleted_at__isnull=False).values_list("pk", flat=True)
    )
    removed = set(report.to_remove)
    report.to_reindex = list(
        dict.fromkeys(
            report.missing
            + report.stale
            + report.failed
            + report.without_graph
            + [pk for pk in report.orphaned if pk not in removed]
        )
    )
    return report


def stuck(*, lease: int, model_id: str | None = None, empty_queues: Collection[str] = ()) -> list[uuid.UUID]:
    """Live documents whose current version is not indexed and that no task holds, for `lease` seconds.

    That is: saved with no index status at all, or saved again while the status still says indexed (the
    process died between the commit and queueing the task); pending with no task ever handed to the
    broker (it was down); or chunking or embedding with no heartbeat for the lease (the task died with
    its process). A document pending with its task in the queue is left to it, however long the queue:
    queued again, it would wait there twice; unless its queue is one of `empty_queues` (config.celery),
    when its task, queued a lease ago, was taken by a worker that died or lost with the broker. Failed
    documents are left to `reconcile`, or a permanent failure would be retried on every pass.
    """
    model_id = model_id or settings.RAG_EMBEDDING_MODEL
    cutoff = timezone.now() - timedelta(seconds=lease)
    # Never indexed for this model, or indexed at an older version, or its task never sent: lost, unless
    # the team is still searched with an earlier model, whose backfill builds them (queued here, they
    # would be queued again every pass while the backfill runs).
    unsent = Q(status__queued_at__isnull=True)
    if empty_queues:
        unsent |= lost_from(lease=lease, empty_queues=empty_queues, through="status__")
    unqueued = (
        Q(status__id__isnull=True)
        | (Q(status__state=IndexState.INDEXED) & ~Q(status__indexed_version=F("version")))
        | (Q(status__state=IndexState.PENDING, status__updated_at__lt=cutoff) & unsent)
    )
    abandoned = Q(status__state__in=WORKING, status__updated_at__lt=cutoff)
    behind = ServingModel.objects.exclude(model_id=model_id).values("team_id")
    # One outer join of documents and this model's statuses (two scans, hashed), not a lookup per document.
    return list(
        Document.objects.annotate(status=FilteredRelation("index_statuses", condition=Q(index_statuses__model_id=model_id)))
        .filter(deleted_at__isnull=True, updated_at__lt=cutoff)
        .filter((unqueued & ~Q(team_id__in=behind)) | abandoned)
        .values_list("pk", flat=True)
    )


@dataclass
class MilvusDrift:
    """How Milvus's copy of the vectors differs from PostgreSQL's chunks (RAG_VECTOR_BACKEND=milvus).

        missing: chunks with no vector in Milvus; stale: vectors whose scalar fields (team, collection, document,
        version) differ from the chunk's; orphaned: vectors of chunks that no longer exist (or of a model Milvus keeps
        them under by mistake); collections: Milvus collections of ours no model's chunks need, such as an old model's
    after a model switch (dropped, vectors and all, by the repair).
    """

    missing: list[int] = field(default_factory=list)
    stale: list[int] = field(default_factory=list)
    orphaned: list[int] = field(default_factory=list)
    collections: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in ("missing", "stale", "orphaned", "collections")}


def milvus_drift() -> MilvusDrift:
    """Compare every Milvus collection of ours with the chunks of its model, row by row (chunk ids and scalar fields).

    The vectors themselves are not compared: a chunk's vector never changes under its id without an outbox row
    (an embedding rewritten in place fires the update trigger).
    """
    drift = MilvusDrift()
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT model_id, vector_dims(embedding) FROM document_embeddings")
        models = {milvus.collection_name(model_id, dimension): model_id for model_id, dimension in cursor.fetchall()}
    stored = set(milvus.our_collections())
    drift.collections = sorted(stored - set(models))
    for name, model_id in models.items():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e.id, e.team_id::text, d.collection_id::text, e.document_id::text, e.document_version"
                " FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id WHERE e.model_id = %s",
                [model_id],
            )
            expected = {pk: (team, collection, document, int(version)) for pk, team, collection, document, version in cursor}
        if name in stored:
            for row in milvus.stored_rows(name):
                want = expected.pop(row.chunk_id, None)
                if want is None:
                    drift.orphaned.append(row.chunk_id)
                elif want != (row.team, row.collection, row.document, row.version):
                    drift.stale.append(row.chunk_id)
        drift.missing.extend(expected)
    return drift


def milvus_repair(drift: MilvusDrift) -> int:
    """Queue every drifted chunk in the outbox (the drain writes or deletes it), drop unneeded collections; how many queued."""
    for name in drift.collections:
        milvus.drop_collection(name)
    chunk_ids = sorted({*drift.missing, *drift.stale, *drift.orphaned})
    outbox_enqueue(chunk_ids)
    return len(chunk_ids)
