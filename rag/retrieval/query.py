"""The query's embedding, cached by model and normalised query."""

from __future__ import annotations

import hashlib

import numpy as np
from django.core.cache import cache

from config.errors import EmbeddingUnavailable
from config.metrics import KIND_EMBEDDING, provider_call
from rag.providers.base import EmbeddingProvider
from rag.providers.embeddings import get_embedding_provider
from rag.providers.errors import ProviderError

QUERY_CACHE_SECONDS = 24 * 3600


def normalise_query(query: str) -> str:
    return " ".join(query.split()).lower()


def embed_query(query: str, provider: EmbeddingProvider | None = None) -> list[float]:
    """The query's vector from `provider` (the configured one by default): the model the chunks it is compared with have."""
    provider = provider or get_embedding_provider()
    key = "rag:q:" + hashlib.sha256(f"{provider.model_id}\x00{normalise_query(query)}".encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return np.frombuffer(cached, dtype=np.float32).tolist()
    try:
        with provider_call(KIND_EMBEDDING, provider.model_id):
            vector = provider.embed_query(query)
    except ProviderError as exc:
        raise EmbeddingUnavailable(f"The embedding provider is unavailable: {exc}") from exc
    cache.set(key, np.asarray(vector, dtype=np.float32).tobytes(), QUERY_CACHE_SECONDS)
    return vector


def vector_literal(vector: list[float]) -> str:
    """A pgvector literal: bound as text and cast, it needs no adapter registered on the connection."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
