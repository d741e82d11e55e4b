"""The optional `llm` graph extractor: typed entities and relations a language model reads from each chunk.

Indexing asks the model about every new chunk text after embedding it and before the swap's
transaction (no transaction is held across a call), one chunk per call, so what is read from a
text comes from that text alone. What passes validation (rag.indexing.graph_llm_prompt) is kept
in `graph_llm_extractions` by extractor (model and prompt version) and content hash: reindexing,
a title change or the same text in another document makes no call, as embeddings are reused.

The swap writes the rules' facts as always (titles, links, names: what multi-hop retrieval
stands on) and adds these: the typed entities (mentions, the document MENTIONS them, a generic
kind becomes the type) and the relations, with the model's predicate and confidence. A failed
call or a malformed answer leaves the chunk with the rules' facts; so does every chunk after
RAG_GRAPH_LLM_MAX_CALLS calls in one indexing batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from config.metrics import KIND_GRAPH_LLM, provider_call
from documents.models import Document
from rag.corpus.names import entity_key, is_meaningful_key, normalised_text
from rag.indexing.graph_extraction import MAX_NAME_LENGTH, PREDICATE_MENTIONS, entities_by_key
from rag.models import GENERIC_KINDS, Chunk, Entity, EntityKind, GraphExtraction, Mention, Relation
from rag.providers import retry
from rag.providers.base import LLMClient
from rag.providers.errors import ProviderError
from rag.providers.llm import get_graph_llm

if TYPE_CHECKING:
    from rag.indexing.graph_llm_prompt import StoredFacts

logger = logging.getLogger(__name__)

MAX_OUTPUT_TOKENS = 2048
# A relation the model is sure of weighs as two mentions in the graph's spread, an unsure one as
# little as co-occurrence (0.5) or less.
RELATION_WEIGHT = 2.0


@dataclass(frozen=True)
class ChunkToRead:
    content_hash: str
    text: str  # what was embedded (the headings above the chunk, then its text): what the hash covers
    label: str  # names the chunk in log lines


class LlmExtractor:
    """Reads chunk texts with one model, at most `max_calls` calls in its lifetime (one indexing batch)."""

    def __init__(self, *, client: LLMClient, max_calls: int) -> None:
        # Imported here: its validation needs pydantic, a quarter of a second at import that
        # processes without the llm extractor need not pay.
        from rag.indexing import graph_llm_prompt

        self.prompt = graph_llm_prompt
        self.client = client
        self.id = f"llm-v{graph_llm_prompt.PROMPT_VERSION}:{client.model}"[:250]
        self.max_calls = max_calls
        self.calls = 0

    def cached(self, hashes: Iterable[str]) -> dict[str, StoredFacts]:
        """What this extractor already read from these texts (no call)."""
        rows = GraphExtraction.objects.filter(extractor=self.id, content_hash__in=list(set(hashes)))
        return dict(rows.values_list("content_hash", "facts"))

    def extract(self, chunks: Iterable[ChunkToRead]) -> dict[str, StoredFacts]:
        """Facts by content hash: cached, else read by the model within the cap. A text left out gets the rules' facts only."""
        todo = {chunk.content_hash: chunk for chunk in chunks}
        facts = self.cached(todo)
        capped = 0
        for content_hash, chunk in todo.items():
            if content_hash in facts:
                continue
            if self.calls >= self.max_calls:
                capped += 1
                continue
            read = self._read(chunk)
            if read is not None:
                # Kept at once: a batch stopped half-way (a time limit, a crash) does not pay again for what it read.
                GraphExtraction.objects.bulk_create(
                    [GraphExtraction(extractor=self.id, content_hash=content_hash, facts=read)], ignore_conflicts=True
                )
                facts[content_hash] = read
        if capped:
            logger.warning(
                "graph llm: RAG_GRAPH_LLM_MAX_CALLS=%d reached in this indexing batch; %d chunk(s) get the rules' facts "
                "only (reindexing them later asks only for what is not cached)",
                self.max_calls,
                capped,
            )
        return facts

    def _read(self, chunk: ChunkToRead) -> StoredFacts | None:
        messages = self.prompt.build_prompt(chunk.text)
        self.calls += 1
        try:
            # The whole answer is needed before it can be read, so a failure mid-stream is retried like any other.
            with provider_call(KIND_GRAPH_LLM, self.client.model):
                answer = retry.call_with_retries(
                    lambda: "".join(self.client.stream(messages, max_tokens=MAX_OUTPUT_TOKENS)),
                    max_retries=settings.RAG_LLM_MAX_RETRIES,
                    what=f"Graph extraction with {self.client.model}",
                    metric=(KIND_GRAPH_LLM, self.client.model),
                )
        except ProviderError as exc:
            logger.warning("graph llm: %s: %s; it gets the rules' facts only", chunk.label, exc)
            return None
        try:
            return self.prompt.read_answer(answer, chunk.text, where=chunk.label)
        except self.prompt.MalformedAnswer as exc:
            logger.warning(
                "graph llm: %s: the answer is not the JSON asked for (%s); it gets the rules' facts only", chunk.label, exc
            )
            return None


def llm_extractor() -> LlmExtractor | None:
    """The llm extractor when the graph is on and RAG_GRAPH_EXTRACTOR is `llm`; None when the rules read alone."""
    if not settings.RAG_GRAPH_ENABLED or settings.RAG_GRAPH_EXTRACTOR == "rules":
        return None
    if settings.RAG_GRAPH_EXTRACTOR != "llm":
        raise ImproperlyConfigured(f"RAG_GRAPH_EXTRACTOR must be rules or llm, got {settings.RAG_GRAPH_EXTRACTOR!r}")
    return LlmExtractor(client=get_graph_llm(), max_calls=settings.RAG_GRAPH_LLM_MAX_CALLS)


def write_llm_facts(*, document: Document, chunks: list[Chunk], facts: Mapping[str, StoredFacts]) -> None:
    """Add what the model read to the rules' facts of these chunks (call inside the swap's transaction, after the rules)."""
    read = [(chunk, facts[chunk.content_hash]) for chunk in chunks if chunk.content_hash in facts]
    if not read:
        return
    wanted: dict[str, tuple[str, str]] = {}
    for _, found in read:
        for item in found["entities"]:
            key = entity_key(item["name"])
            if is_meaningful_key(key):
                wanted.setdefault(key, (item["name"][:MAX_NAME_LENGTH], EntityKind(item["type"].lower())))
    entity = entities_by_key(document.team_id, wanted)
    for kind in {kind for _, kind in wanted.values()}:
        keys = [key for key, (_, k) in wanted.items() if k == kind]
        Entity.objects.filter(team_id=document.team_id, key__in=keys, kind__in=GENERIC_KINDS).update(kind=kind)

    ids = [chunk.pk for chunk, _ in read]
    rows = Mention.objects.filter(chunk_id__in=ids).values_list("chunk_id", "entity_id", "title_only", "kind")
    existing = {(chunk_id, entity_id): (title_only, kind) for chunk_id, entity_id, title_only, kind in rows}
    named = set(existing)
    # The rules saw only a title where the model reads a name in the chunk's words (a name after all, spelled
    # as the model read it), or gave a generic kind where the model gives a type: (chunk, entity) -> (name, kind).
    retyped: dict[tuple[int, uuid.UUID], tuple[str, str]] = {}
    subjects = dict(Mention.objects.filter(chunk_id__in=ids, subject=True).values_list("chunk_id", "entity_id"))
    mentions: list[Mention] = []
    relations: list[Relation] = []
    for chunk, found in read:
        common = {
            "chunk_id": chunk.pk,
            "document_id": document.pk,
            "document_version": chunk.document_version,
            "collection_id": document.collection_id,
            "model_id": chunk.model_id,
        }
        words = f" {normalised_text(chunk.chunk_text)} "
        for item in found["entities"]:
            entity_id = entity.get(entity_key(item["name"]))
            if entity_id is None:
                continue
            name, kind = item["name"][:MAX_NAME_LENGTH], EntityKind(item["type"].lower())
            rules = existing.get((chunk.pk, entity_id))
            if rules is not None and (rules[0] or rules[1] in GENERIC_KINDS):
                retyped.setdefault((chunk.pk, entity_id), (name, kind))
            if (chunk.pk, entity_id) in named:
                continue  # the rules named it already, with their own count and relation
            named.add((chunk.pk, entity_id))
            # A name found only in the headings above the chunk still counts once.
            count = max(1, words.count(f" {normalised_text(item['name'])} "))
            mentions.append(Mention(entity_id=entity_id, name=name, kind=kind, count=min(count, 32767), **common))
            subject = subjects.get(chunk.pk)
            if subject is not None and subject != entity_id:
                relations.append(
                    Relation(
                        source_id=subject,
                        target_id=entity_id,
                        predicate=PREDICATE_MENTIONS,
                        weight=float(min(count, 5)),
                        **common,
                    )
                )
        for relation in found["relations"]:
            source, target = entity.get(entity_key(relation["source"])), entity.get(entity_key(relation["target"]))
            if source is not None and target is not None and source != target:
                relations.append(
                    Relation(
                        source_id=source,
                        target_id=target,
                        predicate=relation["predicate"],
                        confidence=relation["confidence"],
                        weight=RELATION_WEIGHT * relation["confidence"],
                        **common,
                    )
                )
    Mention.objects.bulk_create(mentions, ignore_conflicts=True)
    Relation.objects.bulk_create(relations)
    if retyped:
        # One statement for the batch. A title-only mention takes the model's spelling; a named one keeps the
        # rules' (the chunk's own words).
        with connection.cursor() as cursor:
            cursor.execute(
                """UPDATE graph_mentions m SET kind = u.kind, title_only = FALSE,
                          name = CASE WHEN m.title_only THEN u.name ELSE m.name END
                   FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::text[]) AS u(chunk_id, entity_id, name, kind)
                   WHERE m.chunk_id = u.chunk_id AND m.entity_id = u.entity_id""",
                [
                    [chunk_id for chunk_id, _ in retyped],
                    [entity_id for _, entity_id in retyped],
                    [name for name, _ in retyped.values()],
                    [str(kind) for _, kind in retyped.values()],
                ],
            )


def rewrite_cached_facts(*, document: Document, model_id: str) -> None:
    """After the rules rewrote a renamed document's facts, add back what the model read: from the cache only, no call."""
    extractor = llm_extractor()
    if extractor is None:
        return
    chunks = list(Chunk.objects.filter(document=document, model_id=model_id, document_version=document.version))
    write_llm_facts(document=document, chunks=chunks, facts=extractor.cached(chunk.content_hash for chunk in chunks))
