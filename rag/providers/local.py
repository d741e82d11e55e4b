"""The local embedding provider: all-MiniLM-L6-v2 offline, no torch, no network.

RAG_LOCAL_ENCODER picks who runs the forward pass: `onnx` (onnxruntime, the default, ~3x faster)
or `numpy` (the reference). Both give the same vectors under the same model id.
"""

from __future__ import annotations

import functools
from pathlib import Path

from rag.providers.base import EmbeddingProvider, check_dimension
from rag.providers.minilm import MAX_SEQ_LENGTH, MODEL_ID, MiniLMEncoder

ENCODERS = ("onnx", "numpy")

__all__ = ["ENCODERS", "MAX_SEQ_LENGTH", "MODEL_ID", "LocalEmbeddingProvider", "load_local_model", "save_local_model"]


def save_local_model(encoder: str, cache_dir: str) -> None:
    """Save the onnx encoder's graph and weights under `cache_dir` unless they are there: a parent does it before it forks."""
    if encoder == "onnx" and cache_dir:
        from rag.providers.minilm_onnx import model_files

        model_files(Path(cache_dir))


@functools.cache
def load_local_model(encoder: str = "onnx", threads: int = 1, cache_dir: str = "") -> MiniLMEncoder:
    """One model per process and configuration: the weights are read once however many providers use them.

    `threads` is the onnx encoder's intra-op threads; NumPy's BLAS picks its own (one for a query).
    `cache_dir` is where the onnx encoder keeps its graph and weights, mapped by every process (empty: in memory).
    """
    if encoder == "onnx":
        from rag.providers.minilm_onnx import OnnxMiniLM

        return OnnxMiniLM(threads=threads, cache_dir=Path(cache_dir) if cache_dir else None)
    if encoder == "numpy":
        from rag.providers.minilm_numpy import NumpyMiniLM

        return NumpyMiniLM()
    raise ValueError(f"Unknown local encoder {encoder!r}: use one of {', '.join(ENCODERS)}")


class LocalEmbeddingProvider(EmbeddingProvider):
    def __init__(self, *, dimension: int, encoder: str = "onnx", threads: int = 1, cache_dir: str = "") -> None:
        self.model_id = MODEL_ID
        self.dimension = dimension
        self.max_input_tokens = MAX_SEQ_LENGTH
        self.model = load_local_model(encoder, threads, cache_dir)

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.model.encode(texts).tolist()
        check_dimension(self.model_id, vectors, self.dimension)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.model.encode_query(text).tolist()
        check_dimension(self.model_id, [vector], self.dimension)
        return vector
