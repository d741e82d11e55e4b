"""pgvector against Milvus Lite, side by side in one run: vector and hybrid search p50/p95, recall@10, index build, memory.

The corpus is bench/scoped.py's (synthetic, seeded: clustered unit vectors in 384 dimensions and topical
words, nothing to download), `--chunks` chunks of two teams, of which the reader sees 10% (three of their
team's collections). Both backends rank the same database: PostgreSQL keeps the chunks and the keyword and graph
rankings either way, and with RAG_VECTOR_BACKEND=milvus the vector ranking goes to a Milvus Lite server
(config.milvus_lite, a process of its own, as `make run` starts it) with the reader's scope as a filter, each hit
checked against PostgreSQL.

Measured, in this order:
- pgvector's HNSW index build (the model's partial index dropped and created, maintenance_work_mem 1GB) and its size;
- Milvus: every vector copied through the real backfill path (reconciliation finds them missing, the outbox drain
  upserts them, into a collection made with its HNSW index), then flushed (segments sealed and indexed) and loaded;
  the Milvus Lite server's resident memory before and after;
- for each backend, the reader's unscoped search (`rag.retrieval.search.search`, limit 10, threshold 0) in vector
  and hybrid mode: p50/p95 of the whole search and of its vector stage, short pages; and recall@10 of the vector
  ranking against an exact scan of the same scope.

Data: generated (seeded); the corpus is built once into its own embedded database (shared with bench/scoped.py)
and reused; the Milvus Lite data goes under var/bench-milvus (emptied at each run).
Takes: building 100k chunks some minutes, once; the Milvus copy and index a few minutes; measuring a few minutes.

Reproduce:  .venv/bin/python bench/milvus.py --chunks 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scoped import (  # noqa: E402  (a sibling script, found through sys.path)
    DIMENSION,
    MODEL,
    Corpus,
    build,
    database_name,
    percentile,
    seed_query_cache,
    setup_django,
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pgvector_index_build() -> tuple[float, float]:
    """Seconds to build the model's HNSW index again, and its size in MB."""
    from django.db import connection

    from rag.corpus import vector_index
    from rag.corpus.vector_index import ensure_vector_index, vector_index_name

    name = vector_index_name(MODEL, DIMENSION)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
        cursor.execute("SET maintenance_work_mem = '1GB'")
        vector_index._ensured.clear()
        started = time.perf_counter()
        ensure_vector_index(MODEL, DIMENSION)
        seconds = time.perf_counter() - started
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [name])
        size = cursor.fetchone()[0] / 2**20
    return seconds, size


def milvus_copy_and_build() -> dict:
    """Copy every vector into Milvus through reconciliation and the outbox; then flush and load it (segments sealed and indexed)."""
    from rag.corpus import milvus
    from rag.indexing.reconcile import milvus_drift, milvus_repair
    from rag.indexing.vector_outbox import outbox_drain

    started = time.perf_counter()
    drift = milvus_drift()
    queued = milvus_repair(drift)
    outbox_drain(batch=5000)
    copy_seconds = time.perf_counter() - started
    name = milvus.collection_name(MODEL, DIMENSION)
    client = milvus.client()
    # The collection was made with its HNSW index: flushing seals the copied rows into segments, each indexed.
    started = time.perf_counter()
    client.flush(name)
    client.load_collection(name)
    build_seconds = time.perf_counter() - started
    indexed = client.describe_index(name, "embedding")
    return {
        "queued": queued,
        "copy_s": copy_seconds,
        "build_s": build_seconds,
        "rows": client.get_collection_stats(name)["row_count"],
        "indexed": f"{indexed.get('index_type')} {indexed.get('indexed_rows')}/{indexed.get('total_rows')}",
    }


def measure(user, queries, modes: list[str], visible: int) -> dict:
    from rag.retrieval.search import search

    rows = {}
    for mode in modes:
        for text, _ in queries[:5]:  # warm: connections, plans, the scope's statistics
            search(user=user, query=text, limit=10, threshold=0.0, mode=mode)
        totals, vector_ms, short = [], [], 0
        for text, _ in queries:
            started = time.perf_counter()
            result = search(user=user, query=text, limit=10, threshold=0.0, mode=mode)
            totals.append((time.perf_counter() - started) * 1000)
            vector_ms.append(result.latency.get("vector_ms", 0.0))
            short += len(result.hits) < min(10, visible)
        rows[mode] = {
            "p50": statistics.median(totals),
            "p95": percentile(totals, 0.95),
            "vector_p50": statistics.median(vector_ms),
            "vector_p95": percentile(vector_ms, 0.95),
            "short": short,
            "n": len(totals),
        }
    return rows


def recall(user, queries, visible: int) -> tuple[float, int]:
    """Recall@10 of the vector ranking as search ranks it against an exact scan of the same scope; short pages."""
    from rag.retrieval.stats import model_chunk_count
    from rag.retrieval.vector import vector_ranking
    from rag.retrieval.visibility import search_scope

    scope = search_scope(user=user)
    model_chunks = model_chunk_count(MODEL)
    recalls, short = [], 0
    for _, vector in queries:
        pages = [
            vector_ranking(
                scope=scope,
                vector=vector.tolist(),
                model_id=MODEL,
                dimension=DIMENSION,
                limit=10,
                threshold=-1.0,
                scope_chunks=visible,
                model_chunks=model_chunks,
                path=path,
            )
            for path in ("exact", None)
        ]
        exact, got = pages
        short += len(got) < len(exact)
        kth = exact[-1].score if exact else 0.0
        recalls.append(sum(h.score >= kth - 1e-6 for h in got) / max(len(exact), 1))
    return statistics.mean(recalls), short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100, help="queries per backend and mode")
    parser.add_argument("--modes", default="vector,hybrid")
    args = parser.parse_args()
    setup_django(database_name(args.chunks, 0.10))
    print(f"command: {' '.join([sys.executable, *sys.argv])}", flush=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    info = build(args.chunks, 0.10)
    from django.conf import settings
    from django.core.cache import cache

    from config.milvus_lite import EmbeddedMilvus, free_port
    from permissions.models import User
    from rag.corpus import milvus

    user = User.objects.get(username=info["reader"])
    visible = info["visible"]
    asker = Corpus(seed=99)
    queries = [asker.query() for _ in range(args.queries)]
    modes = args.modes.split(",")
    print(f"{args.chunks} chunks; the reader sees {visible} ({visible / args.chunks:.0%}) in three collections", flush=True)

    pg_build, pg_size = pgvector_index_build()
    print(f"pgvector: HNSW index built in {pg_build:.1f} s, {pg_size:.0f} MB", flush=True)

    data = ROOT / "var" / "bench-milvus"
    shutil.rmtree(data, ignore_errors=True)
    server = EmbeddedMilvus(data, port=free_port())
    process = server.start(log=ROOT / "var" / "bench-milvus.log")
    try:
        idle_rss = rss_mb(process.pid)
        settings.RAG_VECTOR_BACKEND = "milvus"
        settings.RAG_MILVUS_URI = server.uri
        milvus.set_outbox_triggers(enabled=True)
        copied = milvus_copy_and_build()
        milvus_rss = rss_mb(process.pid)
        print(
            f"milvus lite: {copied['rows']} vectors copied through the outbox in {copied['copy_s']:.1f} s;"
            f" flushed, indexed ({copied['indexed']}) and loaded in {copied['build_s']:.1f} s; server RSS {idle_rss:.0f} MB idle,"
            f" {milvus_rss:.0f} MB loaded",
            flush=True,
        )
        results = {}
        for backend in ("pgvector", "milvus"):
            settings.RAG_VECTOR_BACKEND = backend
            cache.clear()
            seed_query_cache(queries)
            results[backend] = measure(user, queries, modes, visible)
            results[backend]["recall"] = recall(user, queries, visible)
        milvus_rss = max(milvus_rss, rss_mb(process.pid))
    finally:
        settings.RAG_VECTOR_BACKEND = "pgvector"
        milvus.set_outbox_triggers(enabled=False)
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    print(f"\n{'backend':9s} {'mode':7s} {'p50 ms':>8s} {'p95 ms':>8s} {'vector p50':>11s} {'vector p95':>11s} {'short':>6s}")
    for backend, rows in results.items():
        for mode in modes:
            r = rows[mode]
            print(
                f"{backend:9s} {mode:7s} {r['p50']:8.1f} {r['p95']:8.1f} {r['vector_p50']:11.1f} {r['vector_p95']:11.1f}"
                f" {r['short']:>3d}/{r['n']}"
            )
    for backend, rows in results.items():
        print(f"{backend}: recall@10 against exact {rows['recall'][0]:.3f}, short pages {rows['recall'][1]}/{len(queries)}")
    for mode in modes:
        ratio = results["milvus"][mode]["p50"] / results["pgvector"][mode]["p50"]
        vector_ratio = results["milvus"][mode]["vector_p50"] / max(results["pgvector"][mode]["vector_p50"], 1e-9)
        print(f"ratio milvus/pgvector {mode}: p50 {ratio:.2f}x, vector stage p50 {vector_ratio:.2f}x")
    print(
        f"index build: pgvector {pg_build:.1f} s, milvus lite flush+index+load {copied['build_s']:.1f} s (copy through the outbox"
        f" {copied['copy_s']:.1f} s); memory: pgvector HNSW index {pg_size:.0f} MB, milvus lite server RSS {milvus_rss:.0f} MB"
    )
    print(f"machine load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
