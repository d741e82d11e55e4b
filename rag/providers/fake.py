"""Deterministic embeddings for tests: hashed bag of words, no model, no network."""
from __future__ import annotations

import hashlib
import os
import re
import time

import numpy as np

from rag.providers.base import EmbeddingProvider

_WORD = re.compile(r"\w+")


class FakeEmbeddingProvider(EmbeddingProvider):
    """Texts sharing words get similar vectors; every batch is recorded in `calls`."""

    def __init__(self, *, model_id: str, dimension: int, max_input_tokens: int = 256) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = max_input_tokens
        self.calls: list[list[str]] = []
        # Lets the worker-kill test land its SIGKILL in the middle of a batch.
        self.delay = float(os.environ.get("RAG_FAKE_EMBED_DELAY", "0") or 0)

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.delay:
            time.sleep(self.delay)
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dimension, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimension
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = np.linalg.norm(vector)
        if norm == 0:
            vector[0] = 1.0
            norm = 1.0
        return (vector / norm).tolist()
