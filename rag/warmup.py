"""What search and answers load before a process serves (config.warmup runs these steps from the servers' hooks).

Before the fork, in the parent: LiteLLM's import when a model goes through it (seconds, and offline only with
LITELLM_LOCAL_MODEL_COST_MAP, which `import_litellm` sets) and the encoder's graph and weights saved to the
file every process maps. In each worker: the configured embedding provider (the local
model's onnxruntime session and tokenizer) with one query through it, so the first search pays for none of it.
On each of a web worker's request threads: a search on the thread's own database connection, which opens it and
prepares search's statements there (and on the search thread its keyword ranking runs on).
"""

from __future__ import annotations

import uuid

from django.conf import settings

from config.errors import NoEmbeddings
from config.metrics import unrecorded
from config.warmup import Step, register_warmup
from permissions.models import User
from rag.models import Chunk
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


def _warm_search_connection() -> None:
    """A hybrid search on this thread's connection, as a member (of no collection, a user never saved) of a team that
    has chunks: its statements planned and prepared, PostgreSQL's caches for them filled. What it finds is dropped."""
    team_id = Chunk.objects.values_list("team_id", flat=True).first()
    if team_id is None:
        return  # nothing indexed yet: the connection that read it is open, which is most of it
    from rag.retrieval.search import search

    try:
        # Nobody's search: the metrics count neither it nor its query's embedding.
        with unrecorded():
            search(user=User(id=uuid.uuid4(), team_id=team_id), query="warm up", limit=10)
    except NoEmbeddings:
        pass  # the team's chunks are another model's: the statements differ by model only in their values


def register() -> None:
    if settings.RAG_ENABLED:
        register_warmup(Step("models", preload=_preload_models, warm=_warm_models, report=_report_models))
        register_warmup(Step("search connections", warm_thread=_warm_search_connection))
