"""Any provider LiteLLM supports (OpenAI, Anthropic, Bedrock, Cohere, Ollama, a LiteLLM proxy) through the litellm library.

Embeddings, answer generation and reranking. LiteLLM's and the OpenAI SDK's own retries are
switched off: rag.providers.retry is the one retry layer, and `provider_error` below is the one
place a LiteLLM exception is classified as transient or permanent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

from config.metrics import record_tokens
from rag.providers.base import BatchedEmbeddingProvider, Message
from rag.providers.errors import (
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    parse_retry_after,
)


def import_litellm() -> ModuleType:
    """Import lazily: litellm takes seconds to import and fetches a cost map unless told not to."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # litellm turns max_retries=0 into its default of 2 SDK retries (`max_retries or DEFAULT`);
    # this default, read once at import, is the only switch that leaves our layer the only one.
    os.environ.setdefault("DEFAULT_MAX_RETRIES", "0")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def preload_litellm() -> None:
    """LiteLLM and the SDK it calls most models through, imported in a parent before it forks its workers.

    Imports only: a call (even a mocked one) would start LiteLLM's logging threads, which a fork does not copy.
    Without this a worker's first answer imported them (~4 s for LiteLLM, ~2 s more for the OpenAI SDK's resources).
    """
    import_litellm()
    import httpcore  # noqa: F401
    import openai

    try:
        import h2.connection  # noqa: F401  (httpx's HTTP/2, which the SDK's client loads on its first request)
    except ImportError:
        pass  # installed without HTTP/2: nothing to load

    client = openai.OpenAI(api_key="warm-up", base_url="http://127.0.0.1:1/v1")  # never called
    client.chat.completions, client.embeddings  # noqa: B018 (the resources load their modules on first access)


def warm_litellm(model: str) -> None:
    """One mocked completion through LiteLLM (no request is sent), in a worker before it serves: what LiteLLM loads on its first call."""
    litellm = import_litellm()
    response = litellm.completion(
        model=model, messages=[{"role": "user", "content": "warm up"}], mock_response="ok", stream=True, max_tokens=1
    )
    for _ in response:
        pass


def provider_error(litellm: ModuleType, exc: Exception) -> ProviderError:
    """A LiteLLM (or network) exception as a transient or permanent ProviderError, with its Retry-After."""
    if isinstance(exc, ProviderError):
        return exc
    transient = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        TimeoutError,
        ConnectionError,
    )
    message = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, transient):
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        return TransientProviderError(message, retry_after=parse_retry_after(headers.get("retry-after")))
    return PermanentProviderError(message)


class LiteLLMEmbeddingProvider(BatchedEmbeddingProvider):
    def __init__(self, *, api_base: str, api_key: str, timeout: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        litellm = import_litellm()
        try:
            response = litellm.embedding(
                model=self.model_id,
                input=batch,
                api_base=self.api_base,
                api_key=self.api_key,
                timeout=self.timeout,
                num_retries=0,
            )
        except Exception as exc:  # the network edge: every failure becomes a ProviderError
            raise provider_error(litellm, exc) from exc
        usage = getattr(response, "usage", None)
        record_tokens(self.model_id, input_tokens=getattr(usage, "prompt_tokens", None))
        data = sorted(response.data, key=lambda item: item["index"])
        return [item["embedding"] for item in data]


class LiteLLMClient:
    """Answer generation (streamed) and reranking with one model."""

    def __init__(self, *, model: str, api_base: str, api_key: str, timeout: float) -> None:
        self.model = model
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout

    def _call_kwargs(self) -> dict:
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key": self.api_key,
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        litellm = import_litellm()
        try:
            response = litellm.completion(
                messages=messages,
                stream=True,
                # The last chunk then carries the call's token usage, for /metrics.
                stream_options={"include_usage": True},
                max_tokens=max_tokens,
                temperature=0.1,
                **self._call_kwargs(),
            )
            for chunk in response:
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    record_tokens(
                        self.model,
                        input_tokens=getattr(usage, "prompt_tokens", None),
                        output_tokens=getattr(usage, "completion_tokens", None),
                    )
                choices = getattr(chunk, "choices", None) or []
                text = getattr(choices[0].delta, "content", None) if choices else None
                if text:
                    yield text
        except Exception as exc:
            raise provider_error(litellm, exc) from exc

    def rerank(self, query: str, documents: list[str], *, top_n: int) -> list[tuple[int, float]]:
        litellm = import_litellm()
        try:
            response = litellm.rerank(
                query=query, documents=documents, top_n=top_n, return_documents=False, **self._call_kwargs()
            )
        except Exception as exc:
            raise provider_error(litellm, exc) from exc
        ranked = []
        for item in response.results or []:
            index = item["index"]
            if isinstance(index, int) and 0 <= index < len(documents):
                ranked.append((index, float(item.get("relevance_score") or 0.0)))
        return sorted(ranked, key=lambda pair: -pair[1])
