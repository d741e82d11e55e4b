"""The support-assistant design's fast path at its scale: embed the question and rank 10k chunks by vector, in process.

The reference design promises embed + search in under 10 ms at about 10,000 chunks. Here each question
goes through the real search code (rag.retrieval.search, vector mode, 10 hits: the query embedded by the
local MiniLM encoder, the reader's scope compiled, the vector ranking, the hits' documents loaded) in this
process, as a worker thread would run it; its query is new to the embedding cache, so the encoder runs
every time. Reported per reader, p50 and p95 of the whole and of its embedding, over `--queries` SciFact
claims a run (each run its own claims), the median of `--runs` runs.

Two readers of bench/latency.py's 10k corpus (run that first: `bench/latency.py --chunks 10000`): its reader,
who sees one collection of ten (about 1,000 chunks), and one made here who is a member of all ten (all 10,000).

Takes: under a minute.

Reproduce:  .venv/bin/python bench/fast_path.py [--chunks 10000] [--runs 3] [--queries 150]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from latency import DATASET, database_name, load_queries, setup_django  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p * (len(ordered) - 1))]


def reader_of_everything(user):
    """A member of every collection the corpus spreads its documents over (made once, kept)."""
    from documents.models import Collection, CollectionMembership
    from permissions.models import User

    everyone, _ = User.objects.get_or_create(username="fast-path-reader", defaults={"team": user.team})
    for collection in Collection.objects.filter(team=user.team):
        CollectionMembership.objects.get_or_create(collection=collection, user=everyone)
    return everyone


def run(user, queries: list[str]) -> dict[str, float]:
    from rag.retrieval.search import search

    totals, embeds = [], []
    stages: dict[str, list[float]] = {}
    for query in queries:
        started = time.perf_counter()
        result = search(user=user, query=query, limit=10, mode="vector")
        totals.append((time.perf_counter() - started) * 1000)
        embeds.append(result.latency.get("embed_ms", 0.0))
        for stage, ms in result.latency.items():
            stages.setdefault(stage.removesuffix("_ms"), []).append(ms)
    print("    stages, median ms: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in stages.items()))
    return {
        "p50": statistics.median(totals),
        "p95": percentile(totals, 0.95),
        "embed_p50": statistics.median(embeds),
        "embed_p95": percentile(embeds, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000, help="which bench/latency.py corpus (default: %(default)s)")
    parser.add_argument("--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder, for its claims")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=150, help="claims per run and reader")
    args = parser.parse_args()
    corpus_file = ROOT / "var" / f"bench-latency-{args.chunks}.json"
    if not corpus_file.exists():
        sys.exit(f"no {args.chunks}-chunk corpus: run bench/latency.py --chunks {args.chunks} first")
    corpus = json.loads(corpus_file.read_text())
    setup_django(database_name(args.chunks))
    from permissions.models import User
    from rag.providers.embeddings import get_embedding_provider
    from rag.retrieval.stats import scope_index_stats
    from rag.retrieval.visibility import search_scope

    reader = User.objects.get(username=corpus["user"])
    readers = {"sees one collection": reader, "sees all": reader_of_everything(reader)}
    get_embedding_provider().embed_query("warm up the model")
    claims = load_queries(args.dataset)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    for label, user in readers.items():
        visible = scope_index_stats(search_scope(user=user), model_id=get_embedding_provider().model_id).chunks
        # Warm this reader's statements and caches, as a served thread's are (config.warmup).
        run(user, claims[-5:])
        runs = []
        for r in range(args.runs):
            # Claims no earlier run or reader asked: the query cache never answers for the encoder.
            start = (r * len(readers) + list(readers).index(label)) * args.queries
            runs.append(run(user, claims[start : start + args.queries]))
            print(
                f"  {label} ({visible} chunks), run {r + 1}: p50 {runs[-1]['p50']:.2f} ms, p95 {runs[-1]['p95']:.2f} ms "
                f"(embedding p50 {runs[-1]['embed_p50']:.2f}, p95 {runs[-1]['embed_p95']:.2f})",
                flush=True,
            )
        median = {key: statistics.median(r[key] for r in runs) for key in ("p50", "p95", "embed_p50", "embed_p95")}
        print(
            f"{label}: {visible} of {args.chunks} chunks; embed + vector search in process, median of {len(runs)} runs: "
            f"p50 {median['p50']:.2f} ms, p95 {median['p95']:.2f} ms (embedding p50 {median['embed_p50']:.2f}, "
            f"p95 {median['embed_p95']:.2f})"
        )


if __name__ == "__main__":
    main()
