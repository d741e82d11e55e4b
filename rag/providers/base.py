"""The small interfaces every provider implements: embeddings, answer generation, reranking."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Protocol

from config.metrics import KIND_EMBEDDING
from rag.providers import retry
from rag.providers.errors import DimensionMismatchError, PermanentProviderError

Message = dict[str, str]


class EmbeddingProvider:
    """Turns text into L2-normalised vectors of length `dimension`.

    `max_input_tokens` is the longest input (in the model's tokens) that is embedded without truncation.
    """

    model_id: str
    dimension: int
    max_input_tokens: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed documents/passages, one vector per text, in input order; raise ProviderError."""
        raise NotImplementedError

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def check_dimension(model_id: str, vectors: Sequence[Sequence[float]], expected: int) -> None:
    for vector in vectors:
        if len(vector) != expected:
            raise DimensionMismatchError(model_id, len(vector), expected)


class BatchedEmbeddingProvider(EmbeddingProvider):
    """Splits input into `batch_size` requests, retries each, and checks the dimension of each result."""

    def __init__(self, *, model_id: str, dimension: int, max_input_tokens: int, batch_size: int, max_retries: int) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = max_input_tokens
        self.batch_size = batch_size
        self.max_retries = max_retries

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            result = retry.call_with_retries(
                functools.partial(self._embed_batch, batch),
                max_retries=self.max_retries,
                what=f"Embedding with {self.model_id}",
                metric=(KIND_EMBEDDING, self.model_id),
            )
            if len(result) != len(batch):
                raise PermanentProviderError(f"Model {self.model_id} returned {len(result)} vectors for {len(batch)} inputs")
            check_dimension(self.model_id, result, self.dimension)
            vectors.extend(result)
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        """One request for at most `batch_size` texts; raises Transient/PermanentProviderError."""
        raise NotImplementedError


class LLMClient(Protocol):
    model: str

    def stream(self, messages: list[Message], *, max_tokens: int) -> Iterator[str]:
        """Yield the answer's text as it is generated; raise ProviderError."""
        ...


class Reranker(Protocol):
    model: str

    def rerank(self, query: str, documents: list[str], *, top_n: int) -> list[tuple[int, float]]:
        """(index into `documents`, relevance) pairs, most relevant first; raise ProviderError."""
        ...


class ChatModel(LLMClient, Reranker, Protocol):
    """A model that can both answer and rerank (every client here can)."""
