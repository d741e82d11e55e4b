"""Any provider LiteLLM supports (OpenAI, Bedrock, Cohere, ...), through the litellm library."""
from __future__ import annotations

import os

from rag.providers.base import BatchedEmbeddingProvider
from rag.providers.errors import PermanentEmbeddingError, TransientEmbeddingError


def import_litellm():
    """Import lazily: litellm takes seconds to import and fetches a cost map unless told not to."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # litellm turns max_retries=0 into its default of 2 SDK retries (`max_retries or DEFAULT`);
    # this default, read once at import, is the only switch that leaves our layer the only one.
    os.environ.setdefault("DEFAULT_MAX_RETRIES", "0")
    import litellm

    return litellm


class LiteLLMProvider(BatchedEmbeddingProvider):
    def __init__(self, *, api_base: str, api_key: str, timeout: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.api_base = api_base or None
        self.api_key = api_key or None
        self.timeout = timeout

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        litellm = import_litellm()
        transient = (
            litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
            litellm.InternalServerError, litellm.ServiceUnavailableError,
        )
        permanent = (litellm.AuthenticationError, litellm.NotFoundError, litellm.BadRequestError, litellm.PermissionDeniedError)
        try:
            response = litellm.embedding(
                model=self.model_id, input=batch, api_base=self.api_base, api_key=self.api_key,
                timeout=self.timeout, num_retries=0,
            )
        except transient as exc:
            raise TransientEmbeddingError(f"{type(exc).__name__}: {exc}") from exc
        except permanent as exc:
            raise PermanentEmbeddingError(f"{type(exc).__name__}: {exc}") from exc
        data = sorted(response.data, key=lambda item: item["index"])
        return [item["embedding"] for item in data]
