"""Indexing services: chunk, embed what is new, swap a document's chunks in one transaction.

When the configured model fails on a batch (after its provider's retries), documents of teams
searched with it are embedded by the fallback model instead (RAG_EMBEDDING_FALLBACK_MODEL), under that
model's id: its vectors never meet the configured model's. The configured model's status stays failed,
so reconciliation and rag.indexing.fallback embed them again once it answers; that swap drops the
fallback's chunks in the same transaction, so a document's current version has one model's chunks.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Case, F, Value, When
from django.db.models.expressions import RawSQL

from config.celery import heartbeat
from config.metrics import KIND_EMBEDDING, provider_call
from documents.models import Document
from rag.corpus.cache_token import team_changed
from rag.corpus.serving_model import fallback_model
from rag.corpus.vector_index import ensure_vector_index
from rag.indexing.chunking import TextChunk, minilm_token_counter
from rag.indexing.code_chunking import chunk_code_document
from rag.indexing.graph_extraction import TeamGraph, link_title_mentions, rename_document_entity, team_graph, write_document_facts
from rag.indexing.graph_llm import ChunkToRead, llm_extractor, rewrite_cached_facts, write_llm_facts
from rag.indexing.index_status import keep_alive, set_state
from rag.indexing.keyword_postings import keyword_columns, refresh_title, write_postings
from rag.indexing.model_switch import record_first_model, serving_models_of, switch_covered_teams
from rag.models import Chunk, IndexState, IndexStatus
from rag.providers.base import EmbeddingProvider
from rag.providers.embeddings import get_embedding_provider
from rag.providers.errors import ProviderError

if TYPE_CHECKING:
    from rag.indexing.graph_llm_prompt import StoredFacts

logger = logging.getLogger(__name__)

# Room kept in every chunk for its heading context (see `embedding_input`).
HEADING_CONTEXT_TOKENS = 32
# Word pieces the tokenizer adds around each input ([CLS] and [SEP] for MiniLM).
SPECIAL_TOKENS = 2


@dataclass
class IndexResult:
    indexed: list[uuid.UUID] = field(default_factory=list)
    skipped: list[uuid.UUID] = field(default_factory=list)
    failed: dict[uuid.UUID, str] = field(default_factory=dict)
    chunks: int = 0
    embedded: int = 0
    # The configured model failed on these; the fallback model embedded them (not in `failed`).
    fallback: list[uuid.UUID] = field(default_factory=list)

    def merge(self, other: IndexResult) -> None:
        self.indexed += other.indexed
        self.skipped += other.skipped
        self.failed.update(other.failed)
        self.fallback += other.fallback
        self.chunks += other.chunks
        self.embedded += other.embedded


def embedding_input(chunk: TextChunk) -> str:
    """What the model reads: headings above the chunk (not already in it), then the chunk."""
    context = [h for h in chunk.heading_path if h not in chunk.text]
    if not context:
        return chunk.text
    return " > ".join(context)[: HEADING_CONTEXT_TOKENS * 4] + "\n" + chunk.text


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chunk_document(document: Document, provider: EmbeddingProvider) -> list[TextChunk]:
    max_tokens = provider.max_input_tokens - SPECIAL_TOKENS - HEADING_CONTEXT_TOKENS
    return chunk_code_document(
        document.text,
        counter=minilm_token_counter(),
        chunk_size=settings.RAG_CHUNK_SIZE,
        overlap=settings.RAG_CHUNK_OVERLAP,
        max_tokens=max_tokens,
    )


def index_documents(
    *, document_ids: list, force: bool = False, provider: EmbeddingProvider | None = None, fallback: bool = False
) -> IndexResult:
    """Bring each document's chunks for the configured model (or `provider`'s) to its current version.

    Documents are embedded together, so the model sees full batches; each document's
    chunks are then swapped in its own transaction, guarded by its version. After the configured
    model's batch, a team indexed for the first time is searched with it from then on, and teams
    still searched with an earlier model switch once it covers them (rag.indexing.model_switch).
    With `fallback`, what the configured model fails on is embedded by the fallback model, if one is set.
    """
    provider = provider or get_embedding_provider()
    result = _index_for(provider, document_ids=document_ids, force=force)
    if provider.model_id == settings.RAG_EMBEDDING_MODEL:
        if result.skipped:
            # Already current with the configured model: a fallback's chunks written meanwhile go.
            drop_fallback_chunks(document_ids=result.skipped)
        if fallback and result.failed:
            _fall_back(result)
        done = result.indexed + result.skipped + result.fallback
        teams = set(Document.objects.filter(pk__in=done).values_list("team_id", flat=True))
        if teams:
            record_first_model(teams)
            switch_covered_teams(team_ids=teams)
    return result


def index_with_serving_models(*, document_ids: list, force: bool = False) -> IndexResult:
    """Index for the configured model, and first for the earlier model a document's team is still searched with.

    While a team waits for a new model to cover it, its searches read the earlier model's chunks: an
    edit is indexed for that model too (first, as that is what the team sees), so nothing the team
    searches goes stale during the backfill. The result is the configured model's.
    """
    for model, ids in serving_models_of(document_ids).items():
        # `force` is for the configured model (a requested reindex); the earlier one only follows versions.
        index_documents(document_ids=ids, provider=model.embedder())
    return index_documents(document_ids=document_ids, force=force, fallback=True)


def _fall_back(result: IndexResult) -> None:
    """Embed with the fallback model what the configured model failed on, moving those documents from `failed` to `fallback`.

    Only documents of teams searched with the configured model: a team still on an earlier model
    (a model switch) is searched with that model's chunks, which its documents keep.
    """
    model = fallback_model()
    if model is None:
        return
    behind = {pk for ids in serving_models_of(list(result.failed)).values() for pk in ids}
    ids = [pk for pk in result.failed if pk not in behind]
    if not ids:
        return
    try:
        provider = model.embedder()
    except (ImproperlyConfigured, ImportError, OSError) as exc:
        logger.error("the fallback embedding model %s cannot be loaded: %s", model.model_id, exc)
        return
    rescued = _index_for(provider, document_ids=ids, force=False)
    errors: dict[str, list[uuid.UUID]] = {}
    for pk in rescued.indexed + rescued.skipped:
        errors.setdefault(result.failed.pop(pk), []).append(pk)
        result.fallback.append(pk)
    for error, same in errors.items():
        note = f"{error[:1500]} (embedded with the fallback model {model.model_id} until {settings.RAG_EMBEDDING_MODEL} answers)"
        IndexStatus.objects.filter(document_id__in=same, model_id=settings.RAG_EMBEDDING_MODEL).update(error=note)
    if result.fallback:
        logger.warning(
            "%s failed: %d document(s) embedded with the fallback model %s instead",
            settings.RAG_EMBEDDING_MODEL,
            len(result.fallback),
            model.model_id,
        )


def drop_fallback_chunks(*, document_ids: list) -> None:
    """Delete the fallback model's chunks and statuses of these documents (the configured model's are current)."""
    model = fallback_model()
    if model is not None:
        Chunk.objects.filter(document_id__in=document_ids, model_id=model.model_id).delete()
        IndexStatus.objects.filter(document_id__in=document_ids, model_id=model.model_id).delete()


@dataclass(frozen=True)
class _Planned:
    """A document cut into chunks, with what the model reads of each and that input's hash."""

    document: Document
    chunks: list[TextChunk]
    inputs: list[str]
    hashes: list[str]


def _index_for(provider: EmbeddingProvider, *, document_ids: list, force: bool) -> IndexResult:
    model_id = provider.model_id
    ensure_vector_index(model_id, provider.dimension)
    result = IndexResult()
    live = _live_documents(list(dict.fromkeys(uuid.UUID(str(pk)) for pk in document_ids)))
    todo = _behind(live, model_id=model_id, force=force, result=result)
    if not todo:
        return result
    ids = [d.pk for d in todo]
    set_state(ids, model_id, IndexState.CHUNKING, attempts=F("attempts") + 1)
    # Alive to the recovery passes however long the embedding takes; a dead process stops beating.
    with heartbeat(lambda: keep_alive(document_ids=ids, model_id=model_id), every=settings.TASK_HEARTBEAT_INTERVAL):
        return _index_todo(provider, todo, result)


def _index_todo(provider: EmbeddingProvider, todo: list[Document], result: IndexResult) -> IndexResult:
    model_id = provider.model_id
    planned = [_plan(document, provider) for document in todo]
    set_state([d.pk for d in todo], model_id, IndexState.EMBEDDING)
    try:
        vectors, result.embedded = _vectors(planned, provider)
    except ProviderError as exc:
        set_state([d.pk for d in todo], model_id, IndexState.FAILED, error=str(exc)[:2000])
        result.failed.update({d.pk: str(exc) for d in todo})
        # The provider already retried transient errors (the one retry layer); what is left
        # is recorded on each document and picked up again by reconciliation.
        logger.warning("embedding failed for %d document(s): %s", len(todo), exc)
        return result
    # Like the embedder, the graph's model reads the new texts before any swap holds a transaction.
    llm_facts = _llm_facts(planned)
    graphs: dict[uuid.UUID, TeamGraph] = {}
    if settings.RAG_GRAPH_ENABLED:
        graphs = {team_id: team_graph(team_id, model_id) for team_id in {p.document.team_id for p in planned}}
    swapped = swap_chunks([(p.document, p.chunks, p.hashes) for p in planned], vectors, model_id, graphs, llm_facts)
    for p in planned:
        if p.document.pk in swapped:
            result.indexed.append(p.document.pk)
            result.chunks += len(p.chunks)
        else:
            result.skipped.append(p.document.pk)
    return result


def _live_documents(document_ids: list[uuid.UUID]) -> list[Document]:
    """The documents that still exist, in the order asked; the chunks of those deleted or gone are removed."""
    documents = {d.pk: d for d in Document.objects.filter(pk__in=document_ids)}
    gone = {pk for pk in document_ids if pk not in documents or documents[pk].deleted_at is not None}
    if gone:
        remove_document_chunks(document_ids=[pk for pk in document_ids if pk in gone])
    return [documents[pk] for pk in document_ids if pk not in gone]


def _behind(live: list[Document], *, model_id: str, force: bool, result: IndexResult) -> list[Document]:
    """The documents whose chunks of `model_id` are not of their current version (all with `force`).

    Every document gets a status row; those already current are marked indexed and counted as skipped.
    """
    statuses = {s.document_id: s for s in IndexStatus.objects.filter(document__in=live, model_id=model_id)}
    IndexStatus.objects.bulk_create(
        [IndexStatus(document=d, model_id=model_id) for d in live if d.pk not in statuses], ignore_conflicts=True
    )
    todo = []
    for document in live:
        status = statuses.get(document.pk)
        current = status and (status.indexed_version, status.indexed_text_hash) == (document.version, content_hash(document.text))
        if not force and current:
            result.skipped.append(document.pk)
        else:
            todo.append(document)
    if result.skipped:
        # Chunks of the current version are in place (a publish or a repeated request).
        set_state(result.skipped, model_id, IndexState.INDEXED)
    return todo


def _plan(document: Document, provider: EmbeddingProvider) -> _Planned:
    chunks = chunk_document(document, provider)
    inputs = [embedding_input(c) for c in chunks]
    return _Planned(document, chunks, inputs, [content_hash(t) for t in inputs])


def _vectors(planned: list[_Planned], provider: EmbeddingProvider) -> tuple[dict[str, list[float]], int]:
    """Every input's vector by hash, and how many had to be embedded; raises ProviderError.

    Any vector this model already computed for the same input, here or elsewhere, is reused.
    """
    wanted = {h for p in planned for h in p.hashes}
    known = dict(
        Chunk.objects.filter(model_id=provider.model_id, content_hash__in=wanted)
        .order_by()
        .distinct("content_hash")
        .values_list("content_hash", "embedding")
    )
    missing: dict[str, str] = {}
    for p in planned:
        for text, h in zip(p.inputs, p.hashes, strict=True):
            if h not in known:
                missing.setdefault(h, text)
    if missing:
        with provider_call(KIND_EMBEDDING, provider.model_id):
            vectors = provider.embed(list(missing.values()))
        known.update(zip(missing.keys(), vectors, strict=False))
    return known, len(missing)


def _llm_facts(planned: list[_Planned]) -> Mapping[str, StoredFacts]:
    """What the graph's LLM extractor (when one is configured) reads from each new chunk, by input hash."""
    extractor = llm_extractor()
    if extractor is None:
        return {}
    return extractor.extract(
        ChunkToRead(h, text, f"document {p.document.pk} chunk {chunk.index}")
        for p in planned
        for chunk, text, h in zip(p.chunks, p.inputs, p.hashes, strict=True)
    )


@transaction.atomic
def swap_chunks(
    planned: Sequence[tuple[Document, list[TextChunk], list[str]]],
    vectors: dict,
    model_id: str,
    graphs: Mapping[uuid.UUID, TeamGraph] | None = None,
    llm_facts: Mapping[str, StoredFacts] | None = None,
) -> set[uuid.UUID]:
    """Replace these documents' chunks (and their keyword postings and graph facts) for `model_id`, in one
    transaction; the ids of those swapped (not one that changed since it was read).

    A batch at once: each statement writes every document's rows (a statement per document cost indexing
    about a tenth of its time beside the encoder; bench/ingest.py).
    """
    fresh = _still_current(planned)
    if not fresh:
        return set()
    ids = [document.pk for document, _, _ in fresh]
    indexed_before = set(Chunk.objects.filter(document_id__in=ids, model_id=model_id).values_list("document_id", flat=True))
    if indexed_before:
        Chunk.objects.filter(document_id__in=indexed_before, model_id=model_id).delete()
    rows = _write_chunks(fresh, vectors, model_id)

    def each(value: Callable[[Document, list[TextChunk]], int | str]) -> Case:
        return Case(*(When(document_id=document.pk, then=Value(value(document, chunks))) for document, chunks, _ in fresh))

    # One statement for the batch: each status takes its document's version, chunk count and the hash of the text cut.
    set_state(
        ids,
        model_id,
        IndexState.INDEXED,
        indexed_version=each(lambda document, _: document.version),
        indexed_text_hash=each(lambda document, _: content_hash(document.text)),
        chunk_count=each(lambda _, chunks: len(chunks)),
        error="",
    )
    if model_id == settings.RAG_EMBEDDING_MODEL:
        # In the swap's transaction: a search sees the fallback's chunks of a document or the configured model's, never both.
        drop_fallback_chunks(document_ids=ids)
    for team_id in {document.team_id for document, _, _ in fresh}:
        team_changed(team_id)  # what the team can retrieve has changed: no cached answer may outlive it
    write_postings(document_ids=ids, model_id=model_id)
    if settings.RAG_GRAPH_ENABLED:
        _write_graph_facts(
            [document for document, _, _ in fresh], rows, model_id, graphs or {}, llm_facts, indexed_before=indexed_before
        )
    return set(ids)


def _still_current(
    planned: Sequence[tuple[Document, list[TextChunk], list[str]]],
) -> list[tuple[Document, list[TextChunk], list[str]]]:
    """The planned documents not deleted or edited since they were read, their rows locked until the swap commits.

    The row locks, taken in one order, order concurrent swaps of a document; the version check drops a
    stale one (the edit that bumped the version has queued its own task).
    """
    current = {
        row["pk"]: row
        for row in Document.objects.select_for_update()
        .filter(pk__in=[document.pk for document, _, _ in planned])
        .order_by("pk")
        .values("pk", "version", "deleted_at")
    }
    return [
        (document, chunks, hashes)
        for document, chunks, hashes in planned
        if document.pk in current
        and current[document.pk]["deleted_at"] is None
        and current[document.pk]["version"] == document.version
    ]


def _write_chunks(fresh: list[tuple[Document, list[TextChunk], list[str]]], vectors: dict, model_id: str) -> list[Chunk]:
    """The documents' new chunk rows, with their vectors and keyword columns, in one insert."""
    new_chunks = [(document, c, h) for document, chunks, hashes in fresh for c, h in zip(chunks, hashes, strict=True)]
    # The keyword columns as the chunks are written (an UPDATE after would write every row again).
    keywords = keyword_columns(chunks=[(document.title, c.text, c.heading_path) for document, c, _ in new_chunks])
    return Chunk.objects.bulk_create(
        [
            Chunk(
                document_id=document.pk,
                team_id=document.team_id,
                chunk_index=c.index,
                chunk_text=c.text,
                document_version=document.version,
                content_hash=h,
                model_id=model_id,
                embedding=vectors[h],
                start_offset=c.start,
                end_offset=c.end,
                metadata={
                    "heading_path": c.heading_path,
                    "has_code": c.has_code,
                    "has_table": c.has_table,
                    "token_count": c.token_count,
                    **_code_metadata(c),
                },
                search_vector=RawSQL("%s::tsvector", (search_vector,)),
                doc_length=doc_length,
            )
            for (document, c, h), (search_vector, doc_length) in zip(new_chunks, keywords, strict=True)
        ]
    )


def _code_metadata(chunk: TextChunk) -> dict:
    """A code chunk's symbols, file lines and language (rag.indexing.code_chunking); nothing for other chunks."""
    if chunk.lines is None:
        return {}
    return {"symbols": list(chunk.symbols), "lines": list(chunk.lines), "language": chunk.language}


def _write_graph_facts(
    documents: list[Document],
    rows: list[Chunk],
    model_id: str,
    graphs: Mapping[uuid.UUID, TeamGraph],
    llm_facts: Mapping[str, StoredFacts] | None,
    *,
    indexed_before: set[uuid.UUID],
) -> None:
    """The graph's facts of the new chunks: by rule, by the LLM extractor's reading, and titles linked."""
    # Each team's titles read once, by the caller or here, however many of its documents the batch holds.
    graphs = dict(graphs)
    for team_id in {document.team_id for document in documents} - graphs.keys():
        graphs[team_id] = team_graph(team_id, model_id)
    by_document: dict[uuid.UUID, list[Chunk]] = {}
    for row in rows:
        by_document.setdefault(row.document_id, []).append(row)
    for document in documents:
        graph = graphs[document.team_id]
        written = by_document.get(document.pk, [])
        write_document_facts(document=document, chunks=written, matcher=graph.matcher)
        if llm_facts:
            write_llm_facts(document=document, chunks=written, facts=llm_facts)
        # Chunks indexed before this document existed could not know its title: link those that name it.
        first_index = document.pk not in indexed_before
        if first_index and graph.oldest_chunk is not None and graph.oldest_chunk < document.created_at:
            link_title_mentions(document=document, model_id=model_id, chunks_before=document.created_at)


@transaction.atomic
def remove_document_chunks(*, document_ids: list) -> None:
    """Delete every model's chunks and statuses of these documents."""
    Chunk.objects.filter(document_id__in=document_ids).delete()
    IndexStatus.objects.filter(document_id__in=document_ids).delete()


@transaction.atomic
def title_changed(document_id: uuid.UUID) -> None:
    """A new title costs no embedding: keyword columns (every model's) are refreshed and the graph relinked."""
    refresh_title(document_id)
    reread_graph_facts(document_id)


def reread_graph_facts(document_id: uuid.UUID) -> bool:
    """Read a document's graph facts again from its indexed chunks, with no embedding (a rename, or rules that changed).

    Returns whether there was a live document to read (its chunks may still be missing).
    """
    document = Document.objects.filter(pk=document_id, deleted_at__isnull=True).first()
    if document is None or not settings.RAG_GRAPH_ENABLED:
        return False
    # The configured model's graph, and the earlier one's while the team is still searched with it.
    models = dict.fromkeys([settings.RAG_EMBEDDING_MODEL, *(m.model_id for m in serving_models_of([document_id]))])
    with transaction.atomic():
        for model_id in models:
            rename_document_entity(document=document, model_id=model_id)
            rewrite_cached_facts(document=document, model_id=model_id)
    return True
