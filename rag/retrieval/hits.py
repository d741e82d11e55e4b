"""What search returns: ranked chunks and the visible documents they belong to."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from documents.models import Document
from rag.corpus.serving_model import SearchModel


def chunk_ref(document_id: uuid.UUID, version: int, chunk_index: int) -> str:
    """A chunk as clients see it: `<documentId>:<version>:<chunkIndex>`.

    Not the row's sequence number, which counts every team's chunks: built from what a hit already
    shows, so it says nothing about other teams and stays the same when that version is embedded again.
    """
    return f"{document_id}:{version}:{chunk_index}"


@dataclass(frozen=True)
class Place:
    """Where one ranking put a chunk: its rank (from 1, among the viewer's visible candidates) and that ranking's scores."""

    rank: int
    score: float  # the ranking's own: cosine, BM25 or graph activation
    relevance: float  # the same on the common 0-1 scale that hybrid fusion averages


@dataclass(frozen=True)
class Explanation:
    """Why a hit ranked where it did (rag.search `explain`): its place in each ranking that found it."""

    places: dict[str, Place]  # by ranking: "vector", "keyword", "graph"
    # Hybrid only: the fused score, and what each ranking added to it (weight x relevance / sum of weights).
    fused: float | None = None
    contributions: dict[str, float] | None = None

    @property
    def found_by(self) -> list[str]:
        return list(self.places)


@dataclass
class Hit:
    """One ranked chunk; rankings fill the id and score, loading fills the rest."""

    chunk_id: int
    score: float
    # The ranking's own evidence on a common 0-1 scale, which score-aware fusion adds up.
    relevance: float = 0.0
    document_id: uuid.UUID | None = None
    chunk_index: int = 0
    text: str = ""
    start: int = 0
    end: int = 0
    version: int = 0
    explanation: Explanation | None = None  # filled only when a search is asked to explain


@dataclass(frozen=True)
class RankedChunk:
    """A hit with its (visible) document, as rag.search shows it."""

    hit: Hit
    document: Document
    context: str | None


@dataclass
class SearchResult:
    hits: list[Hit]
    documents: dict[uuid.UUID, Document]
    latency: dict[str, float] = field(default_factory=dict)
    # The embedding model the rankings read (the team's serving model).
    model: SearchModel | None = None
    # The query's embedding, when a vector ranking ran (vector and hybrid): answers weigh passages by it.
    query_vector: list[float] | None = None
    # The fallback model, when some hits are of documents only it has embedded, and the query by it: a
    # hit's chunk is of one model or the other, and is weighed by that model's query vector only.
    fallback_model: SearchModel | None = None
    fallback_vector: list[float] | None = None

    @property
    def total_ms(self) -> float:
        """The whole search: its stages, but not keyword_ms when the keyword ranking ran beside the others (keyword_wait_ms)."""
        parallel = self.latency.get("keyword_ms", 0.0) if "keyword_wait_ms" in self.latency else 0.0
        return round(sum(self.latency.values()) - parallel, 2)

    def ranked(self, *, include_text: bool = True) -> list[RankedChunk]:
        """Best first, without hits whose document became invisible between ranking and loading."""
        return [
            RankedChunk(hit=hit, document=self.documents[hit.document_id], context=hit.text if include_text else None)
            for hit in self.hits
            if hit.document_id in self.documents
        ]
