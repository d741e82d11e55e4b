"""A LiteLLM proxy (or any OpenAI-compatible server): POST {base}/embeddings over httpx."""

from __future__ import annotations

import httpx

from rag.providers.base import BatchedEmbeddingProvider
from rag.providers.errors import (
    PermanentProviderError,
    TransientProviderError,
    parse_retry_after,
)


class LiteLLMProxyProvider(BatchedEmbeddingProvider):
    def __init__(self, *, base_url: str, api_key: str, timeout: float, **kwargs) -> None:
        super().__init__(**kwargs)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # transport retries stay at 0: rag.providers.retry is the one retry layer.
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        try:
            response = self.client.post("/embeddings", json={"model": self.model_id, "input": batch})
        except httpx.TimeoutException as exc:
            raise TransientProviderError(f"Embedding request timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise TransientProviderError(f"Embedding server unreachable: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientProviderError(
                f"Embedding server answered {response.status_code}",
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        if response.status_code >= 400:
            raise PermanentProviderError(f"Embedding server refused the request ({response.status_code}): {_message(response)}")
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            return [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentProviderError(f"Embedding server sent an unreadable response: {exc}") from exc


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error or body)[:500]
