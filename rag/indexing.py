"""Indexing services: chunk, embed what is new, swap a document's chunks in one transaction."""
from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from documents.models import Document
from rag.chunking import Chunk, chunk_markdown, minilm_token_counter
from rag.keyword import refresh_search_vectors
from rag.models import DocumentEmbedding, IndexJob, IndexState, IndexStatus, JobState
from rag.providers import EmbeddingError, EmbeddingProvider, get_embedding_provider
from rag.vector_index import ensure_vector_index

logger = logging.getLogger(__name__)

# Room kept in every chunk for its heading context (see `embedding_input`).
HEADING_CONTEXT_TOKENS = 32
# Word pieces the tokenizer adds around each input ([CLS] and [SEP] for MiniLM).
SPECIAL_TOKENS = 2
# Rapid edits coalesce: while a queued task has not started, further saves queue nothing. A
# status left pending longer than this (a lost message) no longer holds new requests back.
COALESCE_SECONDS = 300


@dataclass
class IndexResult:
    indexed: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    removed: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    chunks: int = 0
    embedded: int = 0

    def merge(self, other: IndexResult) -> None:
        self.indexed += other.indexed
        self.skipped += other.skipped
        self.removed += other.removed
        self.failed.update(other.failed)
        self.chunks += other.chunks
        self.embedded += other.embedded


def embedding_input(chunk: Chunk) -> str:
    """What the model reads: headings above the chunk (not already in it), then the chunk."""
    context = [h for h in chunk.heading_path if h not in chunk.text]
    if not context:
        return chunk.text
    return " > ".join(context)[: HEADING_CONTEXT_TOKENS * 4] + "\n" + chunk.text


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chunk_document(document: Document, provider: EmbeddingProvider) -> list[Chunk]:
    max_tokens = provider.max_input_tokens - SPECIAL_TOKENS - HEADING_CONTEXT_TOKENS
    return chunk_markdown(
        document.text,
        counter=minilm_token_counter(),
        chunk_size=settings.RAG_CHUNK_SIZE,
        overlap=settings.RAG_CHUNK_OVERLAP,
        max_tokens=max_tokens,
    )


def _set_state(document_ids: Iterable, model_id: str, state: str, **fields) -> None:
    IndexStatus.objects.filter(document_id__in=list(document_ids), model_id=model_id).update(
        state=state, updated_at=timezone.now(), **fields
    )


def index_documents(*, document_ids: list, force: bool = False, provider: EmbeddingProvider | None = None) -> IndexResult:
    """Bring each document's chunks for the current model to its current version.

    Documents are embedded together, so the model sees full batches; each document's
    chunks are then swapped in its own transaction, guarded by its version.
    """
    provider = provider or get_embedding_provider()
    model_id = provider.model_id
    document_ids = list(dict.fromkeys(uuid.UUID(str(pk)) for pk in document_ids))
    ensure_vector_index(model_id, provider.dimension)
    result = IndexResult()

    documents = {d.pk: d for d in Document.objects.filter(pk__in=document_ids)}
    gone = [pk for pk in document_ids if pk not in documents or documents[pk].deleted_at is not None]
    if gone:
        result.removed += remove_document_chunks(document_ids=gone)
    live = [documents[pk] for pk in document_ids if pk not in set(gone)]

    statuses = {s.document_id: s for s in IndexStatus.objects.filter(document__in=live, model_id=model_id)}
    IndexStatus.objects.bulk_create(
        [IndexStatus(document=d, model_id=model_id) for d in live if d.pk not in statuses], ignore_conflicts=True
    )
    todo = []
    for document in live:
        status = statuses.get(document.pk)
        if not force and status and status.indexed_version == document.version:
            result.skipped.append(document.pk)
        else:
            todo.append(document)
    if result.skipped:
        # Chunks of the current version are in place (a publish or a repeated request).
        _set_state(result.skipped, model_id, IndexState.INDEXED)
    if not todo:
        return result

    _set_state([d.pk for d in todo], model_id, IndexState.CHUNKING, attempts=F("attempts") + 1)
    planned: list[tuple[Document, list[Chunk], list[str], list[str]]] = []
    for document in todo:
        chunks = chunk_document(document, provider)
        inputs = [embedding_input(c) for c in chunks]
        planned.append((document, chunks, inputs, [content_hash(t) for t in inputs]))

    # Reuse any vector this model already computed for the same input, here or elsewhere.
    wanted = {h for _, _, _, hashes in planned for h in hashes}
    known = dict(
        DocumentEmbedding.objects.filter(model_id=model_id, content_hash__in=wanted)
        .order_by()
        .distinct("content_hash")
        .values_list("content_hash", "embedding")
    )
    missing: dict[str, str] = {}
    for _, _, inputs, hashes in planned:
        for text, h in zip(inputs, hashes):
            if h not in known:
                missing.setdefault(h, text)

    _set_state([d.pk for d in todo], model_id, IndexState.EMBEDDING)
    try:
        vectors = provider.embed(list(missing.values())) if missing else []
    except EmbeddingError as exc:
        _set_state([d.pk for d in todo], model_id, IndexState.FAILED, error=str(exc)[:2000])
        result.failed.update({d.pk: str(exc) for d in todo})
        # The provider already retried transient errors (the one retry layer); what is left
        # is recorded on each document and picked up again by reconciliation.
        logger.warning("embedding failed for %d document(s): %s", len(todo), exc)
        return result
    known.update(zip(missing.keys(), vectors))
    result.embedded += len(missing)

    for document, chunks, _, hashes in planned:
        if _swap_chunks(document, chunks, hashes, known, model_id):
            result.indexed.append(document.pk)
            result.chunks += len(chunks)
        else:
            result.skipped.append(document.pk)
    return result


@transaction.atomic
def _swap_chunks(document: Document, chunks: list[Chunk], hashes: list[str], vectors: dict, model_id: str) -> bool:
    """Replace the document's chunks for `model_id`; False if it changed since it was read."""
    # The row lock orders concurrent swaps of one document; the version check drops a stale one
    # (the edit that bumped the version has queued its own task).
    current = Document.objects.select_for_update().filter(pk=document.pk).values("version", "deleted_at").first()
    if current is None or current["deleted_at"] is not None or current["version"] != document.version:
        return False
    DocumentEmbedding.objects.filter(document_id=document.pk, model_id=model_id).delete()
    DocumentEmbedding.objects.bulk_create(
        [
            DocumentEmbedding(
                document_id=document.pk, team_id=document.team_id, chunk_index=c.index, chunk_text=c.text,
                document_version=document.version, content_hash=h, model_id=model_id, embedding=vectors[h],
                start_offset=c.start, end_offset=c.end,
                metadata={"heading_path": c.heading_path, "has_code": c.has_code, "has_table": c.has_table, "token_count": c.token_count},
            )
            for c, h in zip(chunks, hashes)
        ]
    )
    _set_state([document.pk], model_id, IndexState.INDEXED, indexed_version=document.version, chunk_count=len(chunks), error="")
    refresh_search_vectors(document_ids=[document.pk], model_id=model_id)
    return True


@transaction.atomic
def remove_document_chunks(*, document_ids: list) -> list:
    """Delete every model's chunks and statuses of these documents."""
    document_ids = [uuid.UUID(str(pk)) for pk in document_ids]
    DocumentEmbedding.objects.filter(document_id__in=document_ids).delete()
    IndexStatus.objects.filter(document_id__in=document_ids).delete()
    return list(document_ids)


def request_index(*, document_id, model_id: str) -> bool:
    """Mark the document pending; False when a task already queued will read its latest version.

    The database, not a per-process cache, holds the marker, so web processes and workers
    agree. A task claims its documents by moving them out of pending, so a save made while
    a task runs queues a fresh one.
    """
    now = timezone.now()
    status, created = IndexStatus.objects.get_or_create(
        document_id=document_id, model_id=model_id, defaults={"state": IndexState.PENDING, "updated_at": now}
    )
    if created:
        return True
    waiting = Q(state=IndexState.PENDING, updated_at__gt=now - timedelta(seconds=COALESCE_SECONDS))
    # A conditional update: of two concurrent requests only one sees the row leave `waiting`.
    return IndexStatus.objects.filter(pk=status.pk).exclude(waiting).update(state=IndexState.PENDING, updated_at=now) == 1


def mark_pending(*, document_ids: list, model_id: str) -> None:
    for document_id in document_ids:
        IndexStatus.objects.update_or_create(
            document_id=document_id, model_id=model_id, defaults={"state": IndexState.PENDING, "updated_at": timezone.now()}
        )


def job_create(*, description: str, total: int, model_id: str, by=None) -> IndexJob:
    return IndexJob.objects.create(description=description, total=total, model_id=model_id, created_by=by)


def job_record(*, job_id, done: int = 0, failed: int = 0) -> None:
    IndexJob.objects.filter(pk=job_id).update(done=F("done") + done, failed=F("failed") + failed)
    IndexJob.objects.filter(pk=job_id, state=JobState.RUNNING, done__gte=F("total") - F("failed")).update(
        state=JobState.DONE, finished_at=timezone.now()
    )
