"""The passages an answer may use: retrieved through search, optionally reranked, weighed as evidence.

Passages come only from `rag.retrieval.search.search()`, which ranks inside
`Document.objects.visible_to(user)`; the prompt, the citations and the extractive fallback are
built from these passages and nothing else. The server numbers them.
"""

from __future__ import annotations

import logging
import time
import uuid
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from config.metrics import KIND_RERANK, provider_call
from config.replicas import read_connection
from documents.selectors import citation_places
from permissions.models import User
from rag.answering.confidence import Assessment, Evidence, assess_confidence
from rag.answering.context import widen_passages
from rag.corpus.names import entity_key, normalised_text, short_title
from rag.providers.errors import ProviderError
from rag.providers.llm import get_reranker
from rag.providers.retry import INTERACTIVE, call_with_retries
from rag.retrieval.hits import Hit
from rag.retrieval.search import search
from rag.retrieval.vector import vector_similarities

logger = logging.getLogger("rag.answers")

# With a reranker, search returns this many candidates for it to reorder.
RERANK_CANDIDATES = 30


@dataclass
class Passage:
    n: int
    chunk_id: int
    document_id: uuid.UUID
    title: str
    url: str
    version: int
    chunk_index: int
    start: int
    end: int
    score: float
    similarity: float
    text: str
    # The file the passage's document version was imported from (its path), else None.
    path: str | None = None
    # Where each PDF page starts in the version's text; empty unless imported from a PDF.
    page_map: tuple[int, ...] = ()
    # The 1-based line of the version's text that `start` is on.
    line: int = 1
    # When the passage's document version was saved (the document's updatedAt): its recency as evidence.
    updated_at: datetime | None = None
    # The matched chunk's own span; `start`/`end`/`text` are wider when neighbouring context was added.
    chunk_start: int = -1
    chunk_end: int = -1
    # The rankings that found it: vector, keyword, graph.
    found_by: tuple[str, ...] = ()
    # Where the document's original lives, for a document a source keeps in sync (a URL, path@commit); else "".
    origin: str = ""

    def __post_init__(self) -> None:
        if self.chunk_start < 0:
            self.chunk_start, self.chunk_end = self.start, self.end

    def citation(self, quote: tuple[int, int] | None = None) -> dict:
        """The passage as cited; `quote` is the span of the sentence the answer quotes (else the matched chunk)."""
        if quote is None:
            chunk = self.text[self.chunk_start - self.start : self.chunk_end - self.start]
            lead = len(chunk) - len(chunk.lstrip())
            quote = (self.chunk_start + lead, max(self.chunk_start + lead, self.chunk_start + len(chunk.rstrip())))
        where = self.path or self.title
        page, lines = None, None
        if self.page_map:
            page = max(1, bisect_right(self.page_map, quote[0]))
            location = f"{where}#page={page}"
        else:
            first = self.line + self.text.count("\n", 0, quote[0] - self.start)
            last = first + self.text.count("\n", quote[0] - self.start, max(quote[0], quote[1] - 1) - self.start)
            lines = {"start": first, "end": last}
            location = f"{where}:{first}-{last}"
        return {
            "n": self.n,
            "document": {"id": str(self.document_id), "title": self.title, "url": self.url, "origin": self.origin},
            "version": self.version,
            "chunkIndex": self.chunk_index,
            "start": self.start,
            "end": self.end,
            "chunkStart": self.chunk_start,
            "chunkEnd": self.chunk_end,
            "score": round(self.score, 6),
            "context": self.text,
            "quote": {"start": quote[0], "end": quote[1]},
            "page": page,
            "lines": lines,
            "location": location,
        }

    def evidence(self) -> Evidence:
        return Evidence(similarity=self.similarity, document_id=self.document_id, version_time=self.updated_at)


@dataclass
class Retrieval:
    query: str
    passages: list[Passage]
    confidence: str
    started: float
    latency: dict[str, float] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)


@dataclass(frozen=True)
class Fact:
    """A graph relation read from passage `n` whose target is the document of passage `target_n`."""

    n: int
    source: str
    predicate: str
    target: str
    target_n: int


MAX_FACTS = 20


def connecting_facts(passages: list[Passage]) -> list[Fact]:
    """Relations read from the passages themselves whose target is another passage's document.

    Only the passages' own chunks are read (they are visible: search chose them through the
    access policy), so a fact here can name nothing the asker cannot read. Each end is named as
    those chunks write it: the source as the relation's own chunk does, the target by the title of
    the passage's document it is (never the spelling of a chunk the asker may not read).
    """
    by_chunk = {p.chunk_id: p.n for p in passages}
    if len(by_chunk) < 2:
        return []
    with read_connection().cursor() as cursor:
        # One fact for each passage and what it names, in the words its sentence states it by when it does
        # ("directed by", in lower case) rather than MENTIONS; the pairs by the weight of their strongest relation.
        cursor.execute(
            """SELECT chunk_id, name, predicate, targets, target_names FROM (
                   SELECT r.chunk_id, r.id, s.name, r.predicate, array_agg(t.chunk_id ORDER BY t.chunk_id) AS targets,
                          array_agg(t.name ORDER BY t.chunk_id) AS target_names,
                          row_number() OVER pair AS nth, max(r.weight) OVER (PARTITION BY r.chunk_id, r.target_id) AS weight
                   FROM graph_relations r
                   JOIN graph_mentions s ON s.chunk_id = r.chunk_id AND s.entity_id = r.source_id AND (s.subject OR NOT s.title_only)
                   JOIN graph_mentions t ON t.entity_id = r.target_id AND t.subject AND t.chunk_id = ANY(%s)
                   WHERE r.chunk_id = ANY(%s) AND r.predicate <> 'CO_OCCURS' AND r.source_id <> r.target_id
                   GROUP BY r.id, r.chunk_id, s.name, r.predicate, r.weight, r.target_id
                   WINDOW pair AS (PARTITION BY r.chunk_id, r.target_id ORDER BY r.predicate ~ '[a-z]' DESC, r.weight DESC, r.id)
               ) f WHERE nth = 1
               ORDER BY weight DESC, chunk_id, id LIMIT %s""",
            [list(by_chunk), list(by_chunk), MAX_FACTS],
        )
        facts = []
        for chunk_id, source, predicate, target_chunks, target_names in cursor.fetchall():
            target_n, target = min((by_chunk[c], name) for c, name in zip(target_chunks, target_names, strict=True))
            facts.append(Fact(n=by_chunk[chunk_id], source=source, predicate=predicate, target=target, target_n=target_n))
        return facts


def short_title_facts(passages: Sequence[Passage], facts: Sequence[Fact]) -> list[Fact]:
    """Links between the passages that the graph does not hold: a passage naming another passage's document by
    the short form of its qualified title ("directed by Michael Davis" names "Michael Davis (director)").

    The graph links a title found whole; text seldom writes a title's qualifier, and made a title alias in the
    graph, a short form linked too much (docs/benchmarks.md, Tried and rejected). Among the few passages an
    answer is given, a name another passage's page carries is a bridge. A short form that two of the passages'
    documents share, or that is the whole title of one of them, links nothing. Only the passages are read.
    """
    known = {(f.n, f.target_n) for f in facts}
    titles = {entity_key(p.title) for p in passages}
    texts = {p.n: f" {normalised_text(p.text)} " for p in passages}
    targets: dict[str, list[tuple[str, Passage]]] = {}
    for passage in passages:
        if (short := short_title(passage.title)) is not None:
            targets.setdefault(entity_key(short), []).append((short, passage))
    linked = []
    for key, named in targets.items():
        if key in titles or len({p.document_id for _, p in named}) > 1:
            continue
        name, target = min(named, key=lambda pair: pair[1].n)
        linked += [
            Fact(n=p.n, source=p.title, predicate="MENTIONS", target=name, target_n=target.n)
            for p in passages
            if p.document_id != target.document_id and (p.n, target.n) not in known and f" {key} " in texts[p.n]
        ]
    return linked


def ms_since(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def passages_confidence(passages: list[Passage]) -> Assessment:
    """How well `passages` support an answer, and why (the rule is in rag.answering.confidence)."""
    return assess_confidence(
        [p.evidence() for p in passages],
        threshold=settings.RAG_ANSWER_MIN_SCORE,
        stale_after_days=settings.RAG_ANSWER_STALE_DAYS,
        now=timezone.now(),
    )


def rerank(query: str, hits: list[Hit], scores: dict[int, float]) -> list[Hit]:
    reranker = get_reranker()
    if reranker is None or len(hits) < 2:
        return hits
    try:
        with provider_call(KIND_RERANK, reranker.model):
            ranked = call_with_retries(
                lambda: reranker.rerank(query, [h.text for h in hits], top_n=len(hits)),
                max_retries=settings.RAG_LLM_MAX_RETRIES,
                what=f"Rerank with {reranker.model}",
                backoff=INTERACTIVE,
                metric=(KIND_RERANK, reranker.model),
            )
    except ProviderError as exc:
        logger.warning("Rerank with %s failed, keeping the hybrid order: %s", reranker.model, exc)
        return hits
    order: dict[int, Hit] = {}
    for index, relevance in ranked:
        if hits[index].chunk_id not in order:
            order[hits[index].chunk_id] = hits[index]
            scores[hits[index].chunk_id] = relevance
    # A reranker that returns fewer items than asked for (or repeats one) must not lose candidates.
    return [*order.values(), *(h for h in hits if h.chunk_id not in order)]


def retrieve(
    *,
    user: User,
    query: str,
    limit: int = 5,
    collection_id=None,
    document_id=None,
    started: float | None = None,
    tags=(),
    include_graph: bool = True,
) -> Retrieval:
    """The passages an answer may use, numbered from 1, and how strongly they support one.

    Without `include_graph` the knowledge graph neither ranks passages nor connects them (no facts).
    """
    started = time.perf_counter() if started is None else started
    latency: dict[str, float] = {}
    lap = time.perf_counter()
    depth = max(limit, RERANK_CANDIDATES) if settings.RAG_RERANK_MODEL else limit
    weights = None if include_graph else (*settings.RAG_HYBRID_WEIGHTS[:2], 0.0)
    result = search(
        user=user,
        query=query,
        limit=depth,
        mode="hybrid",
        collection_id=collection_id,
        document_id=document_id,
        tags=tags,
        weights=weights,
        # Each hit's places in the rankings: the answer's metadata counts the passages each ranking found.
        explain=True,
    )
    hits = [h for h in result.hits if h.document_id in result.documents]
    latency["retrievalMs"] = ms_since(lap)
    scores = {h.chunk_id: h.score for h in hits}
    if settings.RAG_RERANK_MODEL:
        lap = time.perf_counter()
        hits = rerank(query, hits, scores)
        latency["rerankMs"] = ms_since(lap)
    hits = hits[:limit]
    lap = time.perf_counter()
    # Hybrid scores are ranks, not evidence: a passage's evidence is its cosine similarity to the question,
    # by the vector the search embedded and the model it ranked with.
    assert result.query_vector is not None and result.model is not None, "hybrid search embeds the query"
    chunk_ids = [h.chunk_id for h in hits]
    similarity = vector_similarities(vector=result.query_vector, chunk_ids=chunk_ids, model_id=result.model.model_id)
    if result.fallback_model is not None and result.fallback_vector is not None:
        # Each model's query vector meets only its own chunks (the query reads them by model id).
        similarity |= vector_similarities(
            vector=result.fallback_vector, chunk_ids=chunk_ids, model_id=result.fallback_model.model_id
        )
    passages = []
    for n, hit in enumerate((h for h in hits if h.chunk_id in similarity), start=1):
        assert hit.document_id is not None, "hits were kept above only when their document was loaded"
        document = result.documents[hit.document_id]
        passages.append(
            Passage(
                n=n,
                chunk_id=hit.chunk_id,
                document_id=document.pk,
                title=document.title,
                url=document.url,
                version=hit.version,
                chunk_index=hit.chunk_index,
                start=hit.start,
                end=hit.end,
                score=scores[hit.chunk_id],
                similarity=similarity[hit.chunk_id],
                text=hit.text,
                updated_at=document.updated_at,
                found_by=tuple(hit.explanation.found_by) if hit.explanation else (),
                origin=document.origin,
            )
        )
    latency["evidenceMs"] = ms_since(lap)
    lap = time.perf_counter()
    widen_passages(user=user, passages=passages)
    latency["contextMs"] = ms_since(lap)
    places = citation_places(citations=[(p.document_id, p.version, p.start) for p in passages])
    for passage in passages:
        place = places[(passage.document_id, passage.version, passage.start)]
        passage.path, passage.page_map, passage.line = place.path, place.page_map, place.line
    confidence = passages_confidence(passages).level
    facts: list[Fact] = []
    if settings.RAG_GRAPH_ENABLED and include_graph:
        facts = connecting_facts(passages)
        facts += short_title_facts(passages, facts)
    return Retrieval(query=query, passages=passages, confidence=confidence, started=started, latency=latency, facts=facts)
