"""What search returns: ranked chunks and the visible documents they belong to."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from documents.models import Document


@dataclass
class Hit:
    """One ranked chunk; rankings fill the id and score, loading fills the rest."""

    chunk_id: int
    score: float
    document_id: uuid.UUID | None = None
    chunk_index: int = 0
    text: str = ""
    start: int = 0
    end: int = 0
    version: int = 0


@dataclass
class SearchResult:
    hits: list[Hit]
    documents: dict[uuid.UUID, Document]
    latency: dict[str, float] = field(default_factory=dict)
