"""The answer model, the optional reranker and the graph extractor's model, chosen by RAG_LLM_PROVIDER and their model settings."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from rag.providers.base import ChatModel, LLMClient, Reranker
from rag.providers.litellm_client import LiteLLMClient


def _client(model: str) -> ChatModel:
    provider = settings.RAG_LLM_PROVIDER
    if provider == "fake":
        from rag.providers.fakes import fake_llm

        return fake_llm(model)
    if provider == "litellm":
        return LiteLLMClient(
            model=model, api_base=settings.RAG_LLM_BASE_URL, api_key=settings.RAG_LLM_API_KEY, timeout=settings.RAG_LLM_TIMEOUT
        )
    raise ImproperlyConfigured(f"Unknown RAG_LLM_PROVIDER {provider!r}: use litellm or fake")


def get_llm() -> LLMClient | None:
    """The configured answer model, or None when RAG_LLM_MODEL is empty (answers are then extractive)."""
    return _client(settings.RAG_LLM_MODEL) if settings.RAG_LLM_MODEL else None


def get_reranker() -> Reranker | None:
    return _client(settings.RAG_RERANK_MODEL) if settings.RAG_RERANK_MODEL else None


def get_graph_llm() -> LLMClient:
    """The model the `llm` graph extractor asks: RAG_GRAPH_LLM_MODEL, else RAG_LLM_MODEL."""
    model = settings.RAG_GRAPH_LLM_MODEL or settings.RAG_LLM_MODEL
    if not model:
        raise ImproperlyConfigured("RAG_GRAPH_EXTRACTOR=llm needs a model: set RAG_GRAPH_LLM_MODEL (or RAG_LLM_MODEL)")
    return _client(model)
