"""all-MiniLM-L6-v2 run by onnxruntime (RAG_LOCAL_ENCODER=onnx, the default).

The ONNX graph is built in memory from the package's safetensors at load, so the repository ships
no model binary and the vectors are those of the NumPy reference to float32 noise (same model id,
no reindex). Attention, the residual LayerNorms and the bias+GELU are onnxruntime's fused CPU
kernels (the com.microsoft operators its BERT optimiser would produce); the rest is standard ONNX.

One session serves queries and batches on RAG_LOCAL_ENCODER_THREADS intra-op threads (default: the
cores). Unlike NumPy's BLAS, whose second thread doubled a query's latency in a loaded web server,
onnxruntime's pool without spinning gains from the second core even when the cores are contended
(bench/encoder_compare.py).

Every process that serves has its own session (its thread pool does not survive a fork), but the weights are
shared: the graph is saved once under RAG_LOCAL_ENCODER_CACHE_DIR with its weights in a file beside it
(`model_files`), which onnxruntime maps into memory rather than copying, and with weight prepacking off it
computes from that mapping as it is. So the ~90 MB of weights are in memory once, in the page cache, however
many web workers and Celery processes hold a session (bench/footprint.py). Where the directory cannot be
written the graph is built in memory per process, as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rag.providers import minilm
from rag.providers.minilm import MODEL_ID, MiniLMEncoder, MiniLMWeights, model_dir

if TYPE_CHECKING:
    # Imported where a session is made, never before a fork: a process forked after onnxruntime's import
    # aborts when it exits ("terminate called ... No such process"), and `model_files` runs in the parents.
    import onnxruntime as ort

logger = logging.getLogger(__name__)

# onnxruntime's contrib operators for transformers, registered with its CPU execution provider.
_MS = "com.microsoft"


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str, *, domain: str | None = None, **attributes) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [output], domain=domain, **attributes))
        return output


def build_graph(w: MiniLMWeights) -> onnx.ModelProto:
    """The forward pass: int64 `input_ids` and `attention_mask` (batch, length) -> `embeddings` (batch, dim)."""
    g = _GraphBuilder()
    config = w.config
    int64 = lambda *values: np.array(values, dtype=np.int64)  # noqa: E731
    zero, one, two = g.constant("zero", int64(0)), g.constant("one", int64(1)), g.constant("two", int64(2))

    # Embeddings: word + (position + token type 0) for the first `length` positions, then LayerNorm.
    words = g.op("Gather", [g.constant("word_embeddings", w.tensors["embeddings.word_embeddings.weight"]), "input_ids"], "words")
    length = g.op("Slice", [g.op("Shape", ["input_ids"], "ids_shape"), one, two, zero], "length")
    positions = g.op("Slice", [g.constant("position_embeddings", w.position_table()), zero, length, zero], "positions")
    gamma, beta = w.layer_norm("embeddings")
    h = g.op(
        "LayerNormalization",
        [g.op("Add", [words, positions], "embedded"), g.constant("emb_ln_gamma", gamma), g.constant("emb_ln_beta", beta)],
        "h0",
        axis=-1,
        epsilon=config.eps,
    )
    # Attention takes the raw 0/1 mask, (batch, length) int32, and masks padding keys itself.
    key_mask = g.op("Cast", ["attention_mask"], "key_mask", to=TensorProto.INT32)

    for i in range(config.layers):
        wqkv, bqkv = w.qkv(i)  # Attention scales the scores by 1/sqrt(head_dim) itself
        wo, bo = w.dense(i, "attention.output.dense")
        w1, b1 = w.dense(i, "intermediate.dense")
        w2, b2 = w.dense(i, "output.dense")
        ln1 = w.layer_norm(f"encoder.layer.{i}.attention.output")
        ln2 = w.layer_norm(f"encoder.layer.{i}.output")
        c = lambda name, value, i=i: g.constant(f"l{i}_{name}", value)  # noqa: E731
        context = g.op(
            "Attention", [h, c("wqkv", wqkv), c("bqkv", bqkv), key_mask], f"l{i}_context", domain=_MS, num_heads=config.heads
        )
        # SkipLayerNormalization(x, skip, gamma, beta, bias) = LayerNorm(x + bias + skip): the post-LN residual.
        h = g.op(
            "SkipLayerNormalization",
            [g.op("MatMul", [context, c("wo", wo)], f"l{i}_attn"), h, c("ln1_gamma", ln1[0]), c("ln1_beta", ln1[1]), c("bo", bo)],
            f"l{i}_h1",
            domain=_MS,
            epsilon=config.eps,
        )
        # BiasGelu is the exact erf form, as BERT's "gelu" is.
        inter = g.op("BiasGelu", [g.op("MatMul", [h, c("w1", w1)], f"l{i}_inter"), c("b1", b1)], f"l{i}_gelu", domain=_MS)
        h = g.op(
            "SkipLayerNormalization",
            [g.op("MatMul", [inter, c("w2", w2)], f"l{i}_ffn"), h, c("ln2_gamma", ln2[0]), c("ln2_beta", ln2[1]), c("b2", b2)],
            f"l{i}_h2",
            domain=_MS,
            epsilon=config.eps,
        )

    # Mean over real tokens, then L2 normalisation, with the NumPy reference's guards against zero.
    real = g.op("Cast", ["attention_mask"], "real", to=TensorProto.FLOAT)
    masked = g.op("Mul", [h, g.op("Unsqueeze", [real, two], "real_3d")], "masked")
    summed = g.op("ReduceSum", [masked, one], "summed", keepdims=0)
    count = g.op("ReduceSum", [real, one], "count", keepdims=1)
    pooled = g.op(
        "Div", [summed, g.op("Max", [count, g.constant("min_count", np.array(1e-9, dtype=np.float32))], "count_safe")], "pooled"
    )
    norm = g.op("ReduceL2", [pooled, one], "norm", keepdims=1)
    g.op(
        "Div", [pooled, g.op("Max", [norm, g.constant("min_norm", np.array(1e-12, dtype=np.float32))], "norm_safe")], "embeddings"
    )

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", config.dimension])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(_MS, 1)])
    # The onnx package stamps its newest IR version, which onnxruntime may not read yet; opset 18 needs 8.
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def model_files(cache_dir: Path) -> Path | None:
    """The graph saved under `cache_dir` with its weights in a file beside it, built on first use; None if it cannot be written.

    Its name digests what the graph is made from (this code, the checkpoint, the onnx package), so a change
    to any builds a new one rather than reusing a stale graph. Processes starting together may both build it:
    each writes a folder of its own and renames it into place, and the one that finds it there already
    drops its own.
    """
    weights = model_dir() / "model.safetensors"
    digest = hashlib.sha256()
    for source in (Path(__file__), Path(minilm.__file__)):
        digest.update(source.read_bytes())
    digest.update(f"{weights.stat().st_size}:{weights.stat().st_mtime_ns}:{onnx.__version__}".encode())
    final = cache_dir / f"{MODEL_ID}-{digest.hexdigest()[:16]}"
    graph = final / "model.onnx"
    if graph.is_file():
        return graph
    partial = cache_dir / f".{final.name}.{os.getpid()}.tmp"
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        onnx.save_model(
            build_graph(MiniLMWeights.load()),
            str(partial / "model.onnx"),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="weights.bin",
            size_threshold=1024,
        )
        try:
            partial.rename(final)
        except OSError:  # another process put its own there first: the same bytes
            shutil.rmtree(partial, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        logger.warning("cannot save the encoder's graph under %s (%s): each process builds its own in memory", cache_dir, exc)
        return None
    _release_freed_memory()
    return graph


def _release_freed_memory() -> None:
    """Hand the building's temporaries (~300 MB at the peak) back to the system: a parent would pass them on to its workers."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the allocator keeps them, which costs memory and nothing else


def _session(model: bytes | str, *, threads: int) -> ort.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle intra-op threads would otherwise spin for their next task, burning the core that a web
    # worker or the other Celery process needs (measured: a query's p50 x1.8 with spinning on a
    # loaded machine). Without spinning, a busy core costs little: the calling thread takes back
    # the work a descheduled pool thread has not started.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # Prepacking copies each MatMul's weights into a layout of its own, ~45 MB in every process; without it
    # the weights are read from the shared mapping, for ~1 ms more per query (bench/footprint.py).
    options.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _batch_run_options() -> ort.RunOptions:
    """A batch's activations (~100 MB for 4096 tokens) are given back to the system after the run: the memory arena
    would otherwise keep its peak in every Celery process for good. A query's are small and stay for the next one."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class OnnxMiniLM(MiniLMEncoder):
    """Loading takes ~0.2 s once the graph is saved; use `rag.providers.local.load_local_model()` to share one per process."""

    def __init__(self, *, threads: int, cache_dir: Path | None = None) -> None:
        super().__init__()
        self.threads = threads
        graph = model_files(cache_dir) if cache_dir is not None else None
        if graph is not None:
            self.shared_weights = True
            self._session = _session(str(graph), threads=threads)
        else:
            self.shared_weights = False
            # The weights and the graph are temporaries, freed once serialised: only the session keeps a copy.
            model = build_graph(MiniLMWeights.load()).SerializeToString()
            self._session = _session(model, threads=threads)
        # onnxruntime sessions are safe to run from several threads at once (gthread web workers).
        self._batch_run = _batch_run_options()

    def encode_query(self, text: str) -> np.ndarray:
        ids = np.array([self._encoder_tokenizer.encode(text).ids], dtype=np.int64)
        return self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self._session.run(None, {"input_ids": ids, "attention_mask": mask}, self._batch_run)[0]
