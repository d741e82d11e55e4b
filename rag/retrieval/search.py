"""Permission-filtered search: vector, keyword (BM25), graph and hybrid (score-aware fusion) — orchestration only.

The access policy is compiled once (visibility.SearchScope) and sits inside every ranking query,
so ranking starts from the viewer's visible documents and a page is full whenever enough
visible matches exist.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models.expressions import RawSQL

from config.errors import NoEmbeddings
from config.metrics import record_search
from documents.models import Document
from documents.selectors import collection_get, document_get
from permissions.models import User
from rag.models import Chunk
from rag.retrieval.concurrency import can_overlap, run_in_background
from rag.retrieval.explain import explain_hits
from rag.retrieval.fusion import relevance_fusion, spread_documents
from rag.retrieval.graph import graph_ranking, question_graph
from rag.retrieval.hits import Hit, SearchResult
from rag.retrieval.keyword import KeywordRanking, keyword_ranking, keyword_relevances
from rag.retrieval.query import embed_query
from rag.retrieval.serving import serving_model
from rag.retrieval.stats import model_chunk_count, scope_index_stats
from rag.retrieval.vector import vector_ranking, vector_relevances
from rag.retrieval.visibility import SearchScope, search_scope

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
    threshold = settings.RAG_SIMILARITY_THRESHOLD if threshold is None else threshold
    # (vector, keyword, graph); two given weights leave the graph at the configured one.
    hybrid_weights = (*weights, settings.RAG_HYBRID_WEIGHTS[2])[:3] if weights else settings.RAG_HYBRID_WEIGHTS
    # One model for every ranking: the team's serving model (the one before a model change, until
    # the new model's chunks cover the team).
    model = serving_model(user.team_id)
    model_id, dimension = model.model_id, model.dimension
    # A user without a team (an operator) has nothing indexed, as a team without chunks.
    if user.team_id is None or not Chunk.objects.filter(team_id=user.team_id, model_id=model_id).exists():
        raise NoEmbeddings(f"Nothing is indexed for this team with {model_id} yet.")
    lap = _Laps()
    # The policy compiled once, and the scope's size counted once, for every ranking below.
    scope = search_scope(user=user, collection_id=collection_id, document_id=document_id, tags=tags)
    stats = scope_index_stats(scope, model_id=model_id)
    lap("scope_ms")

    depth = limit if mode != "hybrid" else max(HYBRID_CANDIDATES, 2 * limit)
    graph_in_hybrid = mode == "hybrid" and settings.RAG_GRAPH_ENABLED and hybrid_weights[2] > 0
    vector: list[float] = []
    vector_hits: list[Hit] = []
    keyword = KeywordRanking([], {}, 1.0, 0.0)
    # Hybrid weighs every candidate's exact BM25 however it was found: it asks the keyword ranking for candidates.
    keyword_args: dict[str, Any] = {
        "scope": scope,
        "query": query,
        "model_id": model_id,
        "limit": depth,
        "stats": stats,
        "candidates": mode == "hybrid",
    }
    keyword_future = run_in_background(keyword_ranking, **keyword_args) if mode == "hybrid" and can_overlap() else None
    if mode in ("vector", "hybrid"):
        vector = embed_query(query, model.embedder())
        lap("embed_ms")
        vector_hits = vector_ranking(
            scope=scope,
            vector=vector,
            model_id=model_id,
            dimension=dimension,
            limit=depth,
            threshold=threshold,
            scope_chunks=stats.chunks,
            model_chunks=model_chunk_count(model_id),
        )
        lap("vector_ms")
    question = None
    if graph_in_hybrid:
        # What the graph reads from the question alone does not wait for the other rankings: read on
        # this thread while the keyword ranking (usually the slower of the two) still runs.
        question = question_graph(scope=scope, query=query, model_id=model_id, scope_chunks=stats.chunks)
        lap("graph_question_ms")
    if keyword_future is not None:
        keyword, lap.latency["keyword_ms"] = keyword_future.result()
        lap("keyword_wait_ms")
    elif mode in ("keyword", "hybrid"):
        keyword = keyword_ranking(**keyword_args)
        lap("keyword_ms")
    keyword_hits = keyword.hits

    # The rankings by name, kept for explanations only (hybrid fuses them into new hits).
    ranked_by: dict[str, list[Hit]] = {}
    fusion_weights: dict[str, float] | None = None
    relevances: dict[str, dict[int, float]] | None = None
    if mode == "vector":
        hits = ranked_by["vector"] = vector_hits
    elif mode == "keyword":
        hits = ranked_by["keyword"] = keyword_hits
    elif mode == "graph":
        hits = graph_ranking(scope=scope, query=query, model_id=model_id, limit=limit, scope_chunks=stats.chunks).hits
        ranked_by["graph"] = hits
        lap("graph_ms")
    else:
        ranked_by = {"vector": vector_hits, "keyword": keyword_hits}
        rankings = [[(h.chunk_id, h.relevance) for h in vector_hits], [(h.chunk_id, h.relevance) for h in keyword_hits]]
        used = list(hybrid_weights[:2])
        if graph_in_hybrid:
            # The graph spreads from the question's names and from the best chunks of the other two.
            first = relevance_fusion(rankings, weights=used) if any(used) else []
            seeds = [chunk_id for chunk_id, _ in first[:GRAPH_SEED_CHUNKS]]
            graph = graph_ranking(
                scope=scope,
                query=query,
                model_id=model_id,
                limit=depth,
                seed_chunk_ids=seeds,
                scope_chunks=stats.chunks,
                graph_evidence_only=True,
                question=question,
            )
            rankings.append([(h.chunk_id, h.relevance) for h in graph.hits])
            ranked_by["graph"] = graph.hits
            used.append(hybrid_weights[2] * (GRAPH_TITLE_BOOST if graph.names_documents else 1.0))
            lap("graph_ms")
        if not any(used):  # only the graph was weighted, and it is switched off
            used = [1.0] * len(rankings)
        fusion_weights = dict(zip(ranked_by, used, strict=True))
        relevances = _complete(
            {name: dict(ranking) for name, ranking in zip(ranked_by, rankings, strict=True)},
            weights=fusion_weights,
            vector=vector,
            keyword=keyword,
            model_id=model_id,
            threshold=threshold,
        )
        lap("complete_ms")
        fused = dict(relevance_fusion([list(r.items()) for r in relevances.values()], weights=used))
        order = list(fused)
        if document_id is None and settings.RAG_MAX_CHUNKS_PER_DOCUMENT:
            document_of = dict(Chunk.objects.filter(pk__in=order).values_list("pk", "document_id"))
            order = spread_documents(
                list(fused.items()),
                document_of,
                per_document=settings.RAG_MAX_CHUNKS_PER_DOCUMENT,
                repeat_decay=REPEAT_CHUNK_DECAY,
            )
        hits = [Hit(chunk_id=chunk_id, score=fused[chunk_id], relevance=fused[chunk_id]) for chunk_id in order[:limit]]
        lap("fuse_ms")
    hits = hits[:limit]
    if explain:
        explain_hits(hits, ranked_by, weights=fusion_weights, relevances=relevances)
    documents = _load(hits, scope)
    lap("load_ms")
    result = SearchResult(hits=hits, documents=documents, latency=lap.latency, model=model)
    record_search(mode, stages_ms=result.latency, total_ms=result.total_ms, results=len(result.ranked(include_text=False)))
    return result


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
        .only("id", "title", "collection_id", "updated_at", "version")
    )
    return {d.pk: d for d in documents}
