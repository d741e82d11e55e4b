"""Raw throughput of a local MiniLM encoder on SciFact passages (no Django, no database).

Embeds the first `--n` abstracts (title and text) in one batch after a warm-up and reports passages
and word pieces per second. bench/encoder_compare.py runs the encoders side by side, which is the
fairer comparison on shared cores.

Data: BEIR SciFact's corpus.jsonl, by default ../shared/datasets/scifact/corpus.jsonl beside the
repository (`--corpus`, or the SCIFACT_DIR environment variable for its folder).
Takes: under a minute.

Reproduce:  .venv/bin/python bench/encoder_raw.py --n 256                   (onnx, 2 threads)
            .venv/bin/python bench/encoder_raw.py --n 256 --encoder numpy
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# Runnable as a script from anywhere and importable by sibling benches: both need the repo root on sys.path.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rag.providers.local import ENCODERS, MAX_SEQ_LENGTH, load_local_model  # noqa: E402

# The shared datasets sit beside the repository; SCIFACT_DIR points elsewhere.
SCIFACT_DIR = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "datasets" / "scifact"))
DEFAULT_CORPUS = SCIFACT_DIR / "corpus.jsonl"


def load_scifact_passages(n: int, corpus: Path = DEFAULT_CORPUS) -> list[str]:
    passages: list[str] = []
    with corpus.open() as lines:
        for line in lines:
            doc = json.loads(line)
            passages.append(f"{doc['title']}. {doc['text']}")
            if len(passages) >= n:
                break
    return passages


def measure_raw_encoder(texts: list[str], *, encoder: str = "onnx", threads: int = 2) -> dict[str, float]:
    """Encode `texts` once (after a warm-up) and return counts, timings and rates."""
    load_start = time.perf_counter()
    model = load_local_model(encoder, threads)
    load_seconds = time.perf_counter() - load_start
    model.encode(texts[:8])  # warm-up: first BLAS calls and allocator growth are not steady state
    # Tokens the encoder actually processes: truncated at MAX_SEQ_LENGTH, [CLS]/[SEP] included.
    tokens = sum(min(len(e.ids), MAX_SEQ_LENGTH) for e in model.tokenizer.encode_batch(texts))
    start = time.perf_counter()
    model.encode(texts)
    seconds = time.perf_counter() - start
    return {
        "passages": len(texts),
        "tokens": tokens,
        "mean_tokens": tokens / len(texts),
        "seconds": seconds,
        "passages_per_s": len(texts) / seconds,
        "tokens_per_s": tokens / seconds,
        "model_load_seconds": load_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=256, help="number of SciFact passages (default 256)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact's corpus.jsonl (default: %(default)s)")
    parser.add_argument("--encoder", choices=ENCODERS, default="onnx")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads (RAG_LOCAL_ENCODER_THREADS)")
    args = parser.parse_args()
    result = measure_raw_encoder(load_scifact_passages(args.n, args.corpus), encoder=args.encoder, threads=args.threads)
    print(
        f"command: {sys.executable} bench/encoder_raw.py --n {args.n} --corpus {args.corpus} "
        f"--encoder {args.encoder} --threads {args.threads}"
    )
    print(
        f"{result['passages']} passages, {result['mean_tokens']:.0f} tokens each on average: "
        f"{result['passages_per_s']:.1f} passages/s, {result['tokens_per_s']:.0f} tokens/s "
        f"({result['seconds']:.2f} s; model load {result['model_load_seconds']:.2f} s)"
    )


if __name__ == "__main__":
    main()
