"""What search and answers load before a process serves (config.warmup runs these steps from the servers' hooks).

Before the fork, in the parent: LiteLLM's import when a model goes through it (seconds, and offline only with
LITELLM_LOCAL_MODEL_COST_MAP, which `import_litellm` sets) and the encoder's graph and weights saved to the
file every process maps. In each worker: the configured embedding provider (the local
model's onnxruntime session and tokenizer) with one query through it, so the first search pays for none of it.
"""

from __future__ import annotations

from django.conf import settings

from config.warmup import Step, register_warmup
from rag.providers.embeddings import cached_providers, get_embedding_provider
from rag.providers.minilm import get_local_tokenizer


def litellm_needed() -> bool:
    """Whether any model this process may call goes through LiteLLM (answers, reranking, graph extraction, embeddings)."""
    llm = settings.RAG_LLM_PROVIDER == "litellm" and bool(
        settings.RAG_LLM_MODEL or settings.RAG_RERANK_MODEL or settings.RAG_GRAPH_LLM_MODEL
    )
    return llm or "litellm" in {settings.RAG_EMBEDDING_PROVIDER, settings.RAG_EMBEDDING_FALLBACK_PROVIDER}


def _preload_models() -> None:
    if litellm_needed():
        from rag.providers.litellm_client import preload_litellm

        preload_litellm()
    if settings.RAG_EMBEDDING_PROVIDER == "local":
        from rag.providers.local import save_local_model

        save_local_model(settings.RAG_LOCAL_ENCODER, settings.RAG_LOCAL_ENCODER_CACHE_DIR)


def _warm_models() -> str:
    provider = get_embedding_provider()
    provider.model_id  # noqa: B018 (built: a remote provider's first call is a request, not made here)
    if settings.RAG_EMBEDDING_PROVIDER == "local":
        provider.embed_query("warm up")  # the session's first run allocates its buffers
    get_local_tokenizer()  # answers count tokens with it, whatever the embedding model
    loaded = [f"embedding model {provider.model_id}"]
    if litellm_needed():
        from rag.providers.litellm_client import import_litellm, warm_litellm

        import_litellm()  # imported before the fork already (unless the parent did not preload)
        if settings.RAG_LLM_PROVIDER == "litellm" and settings.RAG_LLM_MODEL:
            warm_litellm(settings.RAG_LLM_MODEL)
        loaded.append("litellm")
    return ", ".join(loaded)


def _report_models() -> str:
    loaded = sorted({provider.model_id for provider in cached_providers()})
    return f"loaded ({', '.join(loaded)})" if loaded else "not loaded"


def register() -> None:
    if settings.RAG_ENABLED:
        register_warmup(Step("models", preload=_preload_models, warm=_warm_models, report=_report_models))
