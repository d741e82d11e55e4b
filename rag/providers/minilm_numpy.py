"""all-MiniLM-L6-v2's forward pass in NumPy: the reference encoder (RAG_LOCAL_ENCODER=numpy).

Slower than `minilm_onnx` (bench/encoder_compare.py) but with nothing beyond NumPy and BLAS;
the tests hold the ONNX encoder to its vectors.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from rag.providers.minilm import MiniLMEncoder, MiniLMWeights

# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 on erf, so GELU matches the exact erf form
# (what BERT's "gelu" means) far below float32 noise; the tanh approximation is off by up to ~1e-3.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]
_INV_SQRT2 = np.float32(1 / np.sqrt(2))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + eps)
    x *= gamma
    x += beta
    return x


def _gelu_(x: np.ndarray) -> None:
    """In-place exact-form GELU, x * Phi(x), with erf from A&S 7.1.26."""
    z = np.abs(x)
    z *= _INV_SQRT2
    t = _ERF_P * z
    t += 1.0
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = a5 * t
    for coeff in (a4, a3, a2, a1):
        poly += coeff
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # poly = 1 - erf(|x| / sqrt(2))
    # Phi(x) = 1 - poly/2 for x >= 0 and poly/2 for x < 0.
    poly *= 0.5
    np.subtract(1.0, poly, out=poly, where=x >= 0)
    x *= poly


class NumpyMiniLM(MiniLMEncoder):
    """Loading takes ~0.3 s and ~90 MB; use `rag.providers.local.load_local_model()` to share one."""

    def __init__(self) -> None:
        super().__init__()
        w = MiniLMWeights.load()
        self._heads = w.config.heads
        self._eps = w.config.eps
        self._word = w.tensors["embeddings.word_embeddings.weight"]
        self._pos_type = w.position_table()
        self._emb_ln = w.layer_norm("embeddings")
        # The 1/sqrt(head_dim) score scale is folded into Q.
        scale = 1 / np.sqrt(w.config.dimension // w.config.heads)
        self._layers = [
            (
                *w.qkv(i, query_scale=scale),
                *w.dense(i, "attention.output.dense"),
                w.layer_norm(f"encoder.layer.{i}.attention.output"),
                *w.dense(i, "intermediate.dense"),
                *w.dense(i, "output.dense"),
                w.layer_norm(f"encoder.layer.{i}.output"),
            )
            for i in range(w.config.layers)
        ]

    def encode_query(self, text: str) -> np.ndarray:
        # One short query gains nothing from a second BLAS thread, and in a web server under
        # load the threads only fight over the cores: measured 27 ms p50 with two, 14 with one.
        with threadpool_limits(limits=1, user_api="blas"):
            return self.encode([text])[0]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        dim, heads = self.dimension, self._heads
        head_dim = dim // heads
        real = mask.astype(np.float32)
        h = self._word[ids.reshape(-1)]
        h = h.reshape(batch, length, dim)
        h += self._pos_type[:length]
        h = _layer_norm(h.reshape(-1, dim), *self._emb_ln, self._eps)
        # Additive key mask as in transformers: padding keys get float32 min, so softmax gives them 0.
        key_bias = ((1.0 - real) * np.finfo(np.float32).min)[:, None, None, :]
        for wqkv, bqkv, wo, bo, ln1, w1, b1, w2, b2, ln2 in self._layers:
            qkv = h @ wqkv
            qkv += bqkv
            q, k, v = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            scores = q @ k.transpose(0, 1, 3, 2)
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores *= 1.0 / scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(-1, dim)
            attn = context @ wo
            attn += bo
            attn += h
            h = _layer_norm(attn, *ln1, self._eps)
            inter = h @ w1
            inter += b1
            _gelu_(inter)
            ffn = inter @ w2
            ffn += b2
            ffn += h
            h = _layer_norm(ffn, *ln2, self._eps)
        h = h.reshape(batch, length, dim)
        pooled = np.einsum("bld,bl->bd", h, real) / np.maximum(real.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)
