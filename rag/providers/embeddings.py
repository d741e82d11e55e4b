"""The embedding provider chosen by RAG_EMBEDDING_PROVIDER, built once per configuration."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from rag.providers.base import EmbeddingProvider

_lock = threading.Lock()
_cache: dict[tuple, EmbeddingProvider] = {}


def _config(kind: str | None, model_id: str | None, dimension: int | None) -> tuple:
    return (
        kind or settings.RAG_EMBEDDING_PROVIDER,
        model_id or settings.RAG_EMBEDDING_MODEL,
        dimension or settings.RAG_EMBEDDING_DIMENSION,
        settings.RAG_LITELLM_BASE_URL,
        settings.RAG_LITELLM_API_KEY,
        settings.RAG_BATCH_SIZE,
        settings.RAG_EMBEDDING_TIMEOUT,
        settings.RAG_EMBEDDING_MAX_RETRIES,
        settings.RAG_LOCAL_ENCODER,
        settings.RAG_LOCAL_ENCODER_THREADS,
        settings.RAG_LOCAL_ENCODER_CACHE_DIR,
    )


def get_embedding_provider(
    *, kind: str | None = None, model_id: str | None = None, dimension: int | None = None
) -> EmbeddingProvider:
    """The configured provider, built once per configuration (the local model loads once).

    `kind`, `model_id` and `dimension` name another model than the configured one (the rest of the
    configuration, keys and URLs, stays): the model a team is still searched with while a new one
    is built beside it, or one `index_documents --model` indexes.
    """
    key = _config(kind, model_id, dimension)
    provider = _cache.get(key)
    if provider is None:
        with _lock:
            provider = _cache.get(key) or _build(*key)
            _cache[key] = provider
    return provider


def reset_provider_cache() -> None:
    _cache.clear()


def cached_providers() -> list[EmbeddingProvider]:
    """The providers this process has built so far (what /health reports as loaded)."""
    return list(_cache.values())


def _build(
    kind, model, dimension, base_url, api_key, batch_size, timeout, max_retries, local_encoder, local_threads, local_cache_dir
) -> EmbeddingProvider:
    remote = {
        "model_id": model,
        "dimension": dimension,
        "batch_size": batch_size,
        "max_retries": max_retries,
        "max_input_tokens": 8191,
    }
    if kind == "local":
        from rag.providers.local import MODEL_ID, LocalEmbeddingProvider

        if model != MODEL_ID:
            raise ImproperlyConfigured(f"The local provider only has {MODEL_ID}; RAG_EMBEDDING_MODEL is {model!r}")
        return LocalEmbeddingProvider(
            dimension=dimension, encoder=local_encoder, threads=local_threads, cache_dir=local_cache_dir
        )
    if kind == "fake":
        from rag.providers.fakes import FakeEmbeddingProvider

        return FakeEmbeddingProvider(model_id=model, dimension=dimension)
    if kind == "litellm":
        from rag.providers.litellm_client import LiteLLMEmbeddingProvider

        return LiteLLMEmbeddingProvider(api_base=base_url, api_key=api_key, timeout=timeout, **remote)
    if kind == "litellm_proxy":
        if not base_url:
            raise ImproperlyConfigured("RAG_EMBEDDING_PROVIDER=litellm_proxy needs RAG_LITELLM_BASE_URL")
        from rag.providers.proxy import LiteLLMProxyProvider

        return LiteLLMProxyProvider(base_url=base_url, api_key=api_key, timeout=timeout, **remote)
    raise ImproperlyConfigured(f"Unknown RAG_EMBEDDING_PROVIDER {kind!r}: use local, litellm, litellm_proxy or fake")
