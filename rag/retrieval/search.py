"""Permission-filtered search: vector, keyword (BM25), graph and hybrid (score-aware fusion) — orchestration only.

The access policy is compiled once (visibility.SearchScope) and sits inside every ranking query,
so ranking starts from the viewer's visible documents and a page is full whenever enough
visible matches exist.

Every ranking reads one embedding model's chunks with a query embedded by that model. Documents the
fallback model embedded while the configured one failed (rag.indexing.fallback) are ranked in a
second pass with the fallback model, and the two pages are interleaved by rank (fusion.interleave).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models.expressions import RawSQL

from config.errors import EmbeddingUnavailable, NoEmbeddings
from config.metrics import record_search
from documents.models import Document
from documents.selectors import collection_get, document_get
from permissions.models import User
from rag.corpus.serving_model import SearchModel, fallback_model, serving_model
from rag.models import Chunk
from rag.retrieval.concurrency import can_overlap, run_in_background
from rag.retrieval.explain import explain_hits
from rag.retrieval.fusion import interleave, relevance_fusion, spread_documents
from rag.retrieval.graph_ranking import QuestionGraph, graph_ranking, question_graph
from rag.retrieval.hits import Hit, RankedChunk, SearchResult
from rag.retrieval.keyword import KeywordRanking, keyword_ranking, keyword_relevances
from rag.retrieval.query import embed_query
from rag.retrieval.search_log import search_log_create
from rag.retrieval.stats import IndexStats, model_chunk_count, scope_index_stats
from rag.retrieval.vector import vector_ranking, vector_relevances
from rag.retrieval.visibility import SearchScope, search_scope

logger = logging.getLogger("rag.search")

MODES = ("vector", "keyword", "hybrid", "graph")
# The best chunks of the vector and keyword rankings that seed the graph in hybrid search.
GRAPH_SEED_CHUNKS = 3
# How much more the graph weighs when the question names a document by its title (chosen on the
# train splits: SciFact's claims name no titles, 2WikiMultiHopQA's questions do; docs/benchmarks.md).
GRAPH_TITLE_BOOST = 8.0
# Hybrid fuses this many candidates from each ranking (or more for large limits).
HYBRID_CANDIDATES = 50
# On a hybrid page a document's second chunk competes at this fraction of its fused score, its third at
# the square: another document's passage nearly as good comes before more of the same page (the title's
# words, carried by every chunk of a document, otherwise lift all its chunks alike).
REPEAT_CHUNK_DECAY = 0.85


class _Laps:
    """Milliseconds per stage, for the search log and the answer's latency split."""

    def __init__(self) -> None:
        self.latency: dict[str, float] = {}
        self._started = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.latency[name] = round((now - self._started) * 1000, 2)
        self._started = now


@dataclass
class _Rankings:
    """What the first rankings of one search found: the vector and keyword hits, and the question's graph reading."""

    vector: list[float] = field(default_factory=list)  # the query's embedding (vector and hybrid)
    vector_hits: list[Hit] = field(default_factory=list)
    keyword: KeywordRanking = field(default_factory=lambda: KeywordRanking([], {}, 1.0, 0.0))
    question: QuestionGraph | None = None


@dataclass
class _Fused:
    """Hybrid's page and what explains it: each ranking's hits, weights and completed relevances."""

    hits: list[Hit]
    ranked_by: dict[str, list[Hit]]
    weights: dict[str, float] | None = None
    relevances: dict[str, dict[int, float]] | None = None


@dataclass(frozen=True)
class _Page:
    """One model's page: its hits, best first, and the query's embedding by that model (vector and hybrid)."""

    model: SearchModel
    hits: list[Hit]
    vector: list[float]


@dataclass(frozen=True)
class _Search:
    """One search's fixed inputs, shared by its steps."""

    query: str
    mode: str
    limit: int
    depth: int  # how many candidates each ranking returns
    threshold: float
    weights: tuple[float, ...]  # hybrid's (vector, keyword, graph)
    model: SearchModel
    scope: SearchScope
    stats: IndexStats
    document_id: uuid.UUID | None

    @property
    def graph_in_hybrid(self) -> bool:
        return self.mode == "hybrid" and settings.RAG_GRAPH_ENABLED and self.weights[2] > 0

    def keyword_args(self) -> dict[str, Any]:
        # Hybrid weighs every candidate's exact BM25 however it was found: it asks the keyword ranking for candidates.
        return {
            "scope": self.scope,
            "query": self.query,
            "model_id": self.model.model_id,
            "limit": self.depth,
            "stats": self.stats,
            "candidates": self.mode == "hybrid",
        }


def search(
    *,
    user: User,
    query: str,
    limit: int = 10,
    threshold: float | None = None,
    mode: str = "hybrid",
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    weights: tuple[float, ...] | None = None,
    tags: Sequence[str] = (),
    explain: bool = False,
) -> SearchResult:
    """Rank the chunks of the user's visible documents (those carrying every one of `tags`, normalised) for `query`.

    With `explain`, each hit carries its place in every ranking that found it (Hit.explanation).
    """
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
    if document_id is not None:
        document_get(user=user, document_id=document_id, include_archived=False)
    models = _indexed_models(user)
    lap = _Laps()
    # The policy compiled once, and the scope's size counted once per model, for every ranking below.
    scope = search_scope(user=user, collection_id=collection_id, document_id=document_id, tags=tags)

    def run_for(model: SearchModel) -> _Search:
        return _Search(
            query=query,
            mode=mode,
            limit=limit,
            depth=limit if mode != "hybrid" else max(HYBRID_CANDIDATES, 2 * limit),
            threshold=settings.RAG_SIMILARITY_THRESHOLD if threshold is None else threshold,
            # (vector, keyword, graph); two given weights leave the graph at the configured one.
            weights=(*weights, settings.RAG_HYBRID_WEIGHTS[2])[:3] if weights else settings.RAG_HYBRID_WEIGHTS,
            model=model,
            scope=scope,
            stats=scope_index_stats(scope, model_id=model.model_id),
            document_id=document_id,
        )

    run = run_for(models[0])
    lap("scope_ms")
    page = _page(run, lap, explain=explain)
    hits, fallback = page.hits, None
    if len(models) > 1:
        fallback = _fallback_page(run_for(models[1]), explain=explain)
        lap("fallback_ms")
        if fallback is not None:
            hits = interleave([page.hits, fallback.hits])[:limit]
    documents = _load(hits, scope)
    lap("load_ms")
    result = SearchResult(
        hits=hits,
        documents=documents,
        latency=lap.latency,
        model=page.model,
        query_vector=page.vector or None,
        fallback_model=fallback.model if fallback else None,
        fallback_vector=(fallback.vector or None) if fallback else None,
    )
    record_search(mode, stages_ms=result.latency, total_ms=result.total_ms, results=len(result.ranked(include_text=False)))
    return result


def _page(run: _Search, lap: _Laps, *, explain: bool) -> _Page:
    """One model's rankings for the mode, fused in hybrid: its best `limit` hits."""
    rankings = _first_rankings(run, lap)
    if run.mode == "vector":
        fused = _Fused(hits=rankings.vector_hits, ranked_by={"vector": rankings.vector_hits})
    elif run.mode == "keyword":
        fused = _Fused(hits=rankings.keyword.hits, ranked_by={"keyword": rankings.keyword.hits})
    elif run.mode == "graph":
        graph_hits = graph_ranking(
            scope=run.scope, query=run.query, model_id=run.model.model_id, limit=run.limit, scope_chunks=run.stats.chunks
        ).hits
        fused = _Fused(hits=graph_hits, ranked_by={"graph": graph_hits})
        lap("graph_ms")
    else:
        fused = _hybrid(run, rankings, lap)
    hits = fused.hits[: run.limit]
    if explain:
        explain_hits(hits, fused.ranked_by, weights=fused.weights, relevances=fused.relevances)
    return _Page(model=run.model, hits=hits, vector=rankings.vector)


def _fallback_page(run: _Search, *, explain: bool) -> _Page | None:
    """The fallback model's page (its own stages are not timed apart); None when it cannot embed the query."""
    try:
        return _page(run, _Laps(), explain=explain)
    except EmbeddingUnavailable:
        logger.warning("rag.search without the fallback model's documents: %s cannot embed the query", run.model.model_id)
        return None


@dataclass(frozen=True)
class SearchOutcome:
    """A rag.search response: the page, and whether hybrid fell back to keyword only."""

    ranked: list[RankedChunk]
    limit: int
    degraded: bool


def search_request(
    *,
    user: User,
    query: str,
    mode: str = "hybrid",
    limit: int = 10,
    threshold: float | None = None,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    weights: tuple[float, ...] | None = None,
    tags: Sequence[str] = (),
    explain: bool = False,
    include_text: bool = True,
) -> SearchOutcome:
    """One rag.search (the API's and the MCP search tool's): the search, logged; hybrid degrades to keyword
    when the query cannot be embedded."""
    arguments: dict[str, Any] = {
        "user": user,
        "query": query,
        "limit": limit,
        "threshold": threshold,
        "collection_id": collection_id,
        "document_id": document_id,
        "weights": weights,
        "tags": tags,
        "explain": explain,
    }
    degraded = False
    try:
        result = search(mode=mode, **arguments)
    except EmbeddingUnavailable:
        if mode != "hybrid":
            raise
        # Hybrid without its vector half: the keyword ranking still answers, flagged, rather than a 503.
        logger.warning("rag.search degraded to keyword: the embedding provider is unavailable")
        result, degraded = search(mode="keyword", **arguments), True
    ranked = result.ranked(include_text=include_text)
    search_log_create(user=user, query=query, mode=mode, result=result, results=len(ranked), degraded=degraded)
    return SearchOutcome(ranked=ranked, limit=limit, degraded=degraded)


def _indexed_models(user: User) -> list[SearchModel]:
    """The models whose chunks the team's search ranks: its serving model (the one before a model change, until the
    new model's chunks cover the team), then the fallback model while some documents have only its chunks.
    NoEmbeddings when the team has chunks of neither."""
    model = serving_model(user.team_id)
    # A user without a team (an operator) has nothing indexed, as a team without chunks.
    if user.team_id is None:
        raise NoEmbeddings(f"Nothing is indexed for this team with {model.model_id} yet.")
    candidates = [model]
    fallback = fallback_model()
    # A team still on an earlier model keeps that model's chunks of every document: the fallback never indexes for it.
    if fallback is not None and model.model_id == settings.RAG_EMBEDDING_MODEL:
        candidates.append(fallback)
    models = [m for m in candidates if Chunk.objects.filter(team_id=user.team_id, model_id=m.model_id).exists()]
    if not models:
        raise NoEmbeddings(f"Nothing is indexed for this team with {model.model_id} yet.")
    return models


def _first_rankings(run: _Search, lap: _Laps) -> _Rankings:
    """The vector and keyword rankings the mode asks for, and in hybrid the graph's reading of the question.

    In hybrid the keyword ranking (usually the slowest) runs on another thread beside the others.
    """
    found = _Rankings()
    hybrid = run.mode == "hybrid"
    keyword_future = run_in_background(keyword_ranking, **run.keyword_args()) if hybrid and can_overlap() else None
    if run.mode in ("vector", "hybrid"):
        found.vector = embed_query(run.query, run.model.embedder())
        lap("embed_ms")
        found.vector_hits = vector_ranking(
            scope=run.scope,
            vector=found.vector,
            model_id=run.model.model_id,
            dimension=run.model.dimension,
            limit=run.depth,
            threshold=run.threshold,
            scope_chunks=run.stats.chunks,
            model_chunks=model_chunk_count(run.model.model_id),
        )
        lap("vector_ms")
    if run.graph_in_hybrid:
        # What the graph reads from the question alone does not wait for the other rankings: read on
        # this thread while the keyword ranking still runs.
        found.question = question_graph(
            scope=run.scope, query=run.query, model_id=run.model.model_id, scope_chunks=run.stats.chunks
        )
        lap("graph_question_ms")
    if keyword_future is not None:
        found.keyword, lap.latency["keyword_ms"] = keyword_future.result()
        lap("keyword_wait_ms")
    elif run.mode in ("keyword", "hybrid"):
        found.keyword = keyword_ranking(**run.keyword_args())
        lap("keyword_ms")
    return found


def _hybrid(run: _Search, found: _Rankings, lap: _Laps) -> _Fused:
    """Fuse the vector, keyword and (seeded by their best chunks) graph rankings by each candidate's relevances."""
    ranked_by = {"vector": found.vector_hits, "keyword": found.keyword.hits}
    rankings = [[(h.chunk_id, h.relevance) for h in found.vector_hits], [(h.chunk_id, h.relevance) for h in found.keyword.hits]]
    used = list(run.weights[:2])
    if run.graph_in_hybrid:
        # The graph spreads from the question's names and from the best chunks of the other two.
        first = relevance_fusion(rankings, weights=used) if any(used) else []
        graph = graph_ranking(
            scope=run.scope,
            query=run.query,
            model_id=run.model.model_id,
            limit=run.depth,
            seed_chunk_ids=[chunk_id for chunk_id, _ in first[:GRAPH_SEED_CHUNKS]],
            scope_chunks=run.stats.chunks,
            graph_evidence_only=True,
            question=found.question,
        )
        rankings.append([(h.chunk_id, h.relevance) for h in graph.hits])
        ranked_by["graph"] = graph.hits
        used.append(run.weights[2] * (GRAPH_TITLE_BOOST if graph.names_documents else 1.0))
        lap("graph_ms")
    if not any(used):  # only the graph was weighted, and it is switched off
        used = [1.0] * len(rankings)
    weights = dict(zip(ranked_by, used, strict=True))
    relevances = _complete(
        {name: dict(ranking) for name, ranking in zip(ranked_by, rankings, strict=True)},
        weights=weights,
        vector=found.vector,
        keyword=found.keyword,
        model_id=run.model.model_id,
        threshold=run.threshold,
    )
    lap("complete_ms")
    fused = dict(relevance_fusion([list(r.items()) for r in relevances.values()], weights=used))
    order = list(fused)
    if run.document_id is None and settings.RAG_MAX_CHUNKS_PER_DOCUMENT:
        document_of = dict(Chunk.objects.filter(pk__in=order).values_list("pk", "document_id"))
        order = spread_documents(
            list(fused.items()),
            document_of,
            per_document=settings.RAG_MAX_CHUNKS_PER_DOCUMENT,
            repeat_decay=REPEAT_CHUNK_DECAY,
        )
    hits = [Hit(chunk_id=chunk_id, score=fused[chunk_id], relevance=fused[chunk_id]) for chunk_id in order[: run.limit]]
    lap("fuse_ms")
    return _Fused(hits=hits, ranked_by=ranked_by, weights=weights, relevances=relevances)


def _complete(
    relevances: dict[str, dict[int, float]],
    *,
    weights: dict[str, float],
    vector: list[float],
    keyword: KeywordRanking,
    model_id: str,
    threshold: float,
) -> dict[str, dict[int, float]]:
    """Every candidate's vector and keyword relevance, not only where those rankings put it in their top.

    A chunk the keyword ranking found but the vector ranking cut (or the reverse, or one only the
    graph reached) would otherwise count 0 there: the fused score should weigh its real evidence,
    whatever each list's depth (SciFact hybrid nDCG@10 0.7270 -> 0.7447 at the depth a 10-hit page
    fuses; docs/benchmarks.md). The candidates all come from rankings that filtered by the scope.
    """
    candidates = sorted(set().union(*relevances.values()))
    if weights.get("vector"):
        missing = [pk for pk in candidates if pk not in relevances["vector"]]
        relevances["vector"].update(vector_relevances(vector=vector, chunk_ids=missing, model_id=model_id, threshold=threshold))
    if weights.get("keyword"):
        missing = [pk for pk in candidates if pk not in relevances["keyword"]]
        relevances["keyword"].update(keyword_relevances(keyword, chunk_ids=missing, model_id=model_id))
    return relevances


def _load(hits: list[Hit], scope: SearchScope) -> dict[uuid.UUID, Document]:
    """Fill chunk text and offsets, and load the (visible) documents, in two queries."""
    rows = {
        r["id"]: r
        for r in Chunk.objects.filter(pk__in=[h.chunk_id for h in hits]).values(
            "id", "document_id", "chunk_index", "chunk_text", "start_offset", "end_offset", "document_version"
        )
    }
    for hit in hits:
        row = rows[hit.chunk_id]
        hit.document_id, hit.chunk_index, hit.text = row["document_id"], row["chunk_index"], row["chunk_text"]
        hit.start, hit.end, hit.version = row["start_offset"], row["end_offset"], row["document_version"]
    # Through the scope's policy SQL again: the documents were visible when ranked, and still must be now.
    visible = RawSQL(f"SELECT v.id FROM ({scope.sql}) v", scope.params)
    documents = (
        Document.objects.filter(pk__in={h.document_id for h in hits})
        .filter(pk__in=visible)
        .only("id", "title", "collection_id", "updated_at", "version", "origin")
    )
    return {d.pk: d for d in documents}
