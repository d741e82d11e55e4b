"""What the Prometheus metrics cost a search: the metric updates alone, and rag.search with them on and off.

1. Per search, the updates one rag.search makes (one request histogram, one histogram per search
   stage and the whole, one embedding call's counter and histogram), timed in a loop, in both of
   prometheus_client's modes: one process (a float behind a lock) and multiprocess (an mmap'ed
   file per process, what `make run` and docker-compose use).
2. rag.search through Django's whole middleware stack (the test client, no network), on a small
   synthetic corpus indexed with the fake embedding provider, every query new (so it is embedded):
   p50 and p95 in three arms, rounds alternating: `on` (as deployed), `metrics_off` (every metric
   update replaced by a no-op) and `metrics_and_log_off` (the search log's row not written either).
3. The search log's row alone, median of 300 writes: as written (a transaction whose commit does
   not wait for the WAL flush) and as a plain autocommit INSERT would be.

Data: a synthetic corpus of `--docs` documents, indexed with the fake embedding provider into the
embedded database cairn_bench_metrics; nothing to download.
Takes: a few minutes with `--rounds 30`.

Reproduce:  .venv/bin/python bench/metrics_overhead.py --rounds 30 [--searches 300] [--docs 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE = "cairn_bench_metrics"
STAGES = {"scope_ms": 1.2, "embed_ms": 0.4, "vector_ms": 3.1, "keyword_ms": 2.2, "keyword_wait_ms": 0.3, "graph_ms": 1.0}
STAGES |= {"fuse_ms": 0.2, "load_ms": 0.6}
WORDS = "owl hunt night forest river deploy rollback volcano ash lava mouse barn team release search index token".split()


def updates_per_search(iterations: int) -> float:
    """Microseconds for the metric updates of one hybrid rag.search, in this process's prometheus_client mode."""
    from config.metrics import HTTP_REQUEST_SECONDS, KIND_EMBEDDING, provider_call, record_search

    def one() -> None:
        with provider_call(KIND_EMBEDDING, "bench-model"):
            pass
        record_search("hybrid", stages_ms=STAGES, total_ms=8.8, results=10)
        HTTP_REQUEST_SECONDS.labels("POST", "/api/rag.search", "2xx").observe(0.012)

    for _ in range(200):
        one()
    started = time.perf_counter()
    for _ in range(iterations):
        one()
    return (time.perf_counter() - started) / iterations * 1e6


def micro(iterations: int) -> dict[str, float]:
    """Both modes, each in a fresh process (the mode is chosen when prometheus_client is imported)."""
    results = {}
    for mode in ("single-process", "multiprocess"):
        with tempfile.TemporaryDirectory() as directory:
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
            if mode == "multiprocess":
                env["PROMETHEUS_MULTIPROC_DIR"] = directory
            script = f"import django; django.setup(); from bench.metrics_overhead import updates_per_search; print(updates_per_search({iterations}))"
            out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
            results[mode] = float(out.stdout.strip().splitlines()[-1])
    return results


class _NoMetric:
    def labels(self, *args):
        return self

    def observe(self, value):
        pass

    def inc(self, amount=1):
        pass


def metrics_off() -> None:
    """Every update rag.search makes replaced by a no-op (the endpoint, the search and the embedding call)."""
    import config.metrics
    import rag.retrieval.query
    import rag.retrieval.search

    config.metrics.HTTP_REQUEST_SECONDS = _NoMetric()  # type: ignore[assignment]
    rag.retrieval.search.record_search = lambda *args, **kwargs: None
    rag.retrieval.query.provider_call = lambda *args: nullcontext()  # type: ignore[assignment]


def build_corpus(docs: int) -> str:
    """One team whose reader sees every document (built once per size, then reused); the reader's API token."""
    from django.core.management import call_command

    from documents.models import Collection, CollectionMembership, Document
    from permissions.models import Access, Role, Team, TokenScope, User
    from permissions.services import api_token_create
    from rag.indexing.pipeline import index_documents

    call_command("migrate", verbosity=0)
    team = Team.objects.filter(name=f"Metrics bench {docs}").first()
    if team is not None:
        return api_token_create(user=User.objects.get(username=f"metrics-bench-{docs}"), scope=TokenScope.READ).plaintext
    team = Team.objects.create(name=f"Metrics bench {docs}")
    reader = User.objects.create(username=f"metrics-bench-{docs}", team=team)
    collection = Collection.objects.create(team=team, name="Bench", default_access=Access.READ)
    CollectionMembership.objects.create(collection=collection, user=reader, role=Role.READ)
    documents = [
        Document.objects.create(
            team=team,
            collection=collection,
            title=f"Note {i}",
            text=f"# Note {i}\n\n" + " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(120)),
            published_at=collection.created_at,
        )
        for i in range(docs)
    ]
    index_documents(document_ids=[d.pk for d in documents])
    return api_token_create(user=reader, scope=TokenScope.READ).plaintext


def search_rounds(token: str, searches: int, rounds: int) -> dict[str, list[float]]:
    """Milliseconds per rag.search in each arm, in alternating rounds (the no-op patches are undone after each)."""
    from django.test import Client

    import config.metrics
    import rag.retrieval.query
    import rag.retrieval.search

    saved = (config.metrics.HTTP_REQUEST_SECONDS, rag.retrieval.search.record_search, rag.retrieval.query.provider_call)
    log = rag.retrieval.search.search_log_create
    client = Client(headers={"Authorization": f"Bearer {token}"})
    times: dict[str, list[float]] = {"on": [], "metrics_off": [], "metrics_and_log_off": []}
    n = 0
    for _ in range(rounds):
        for arm in times:
            if arm != "on":
                metrics_off()
            if arm == "metrics_and_log_off":
                rag.retrieval.search.search_log_create = lambda **kwargs: None  # type: ignore[assignment]
            for _ in range(searches // rounds):
                n += 1
                query = f"{WORDS[n % len(WORDS)]} {WORDS[(n * 5) % len(WORDS)]} q{n}"  # new every time: embedded, not cached
                started = time.perf_counter()
                response = client.post("/api/rag.search", {"query": query, "limit": 10}, content_type="application/json")
                times[arm].append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.content
            config.metrics.HTTP_REQUEST_SECONDS, rag.retrieval.search.record_search, rag.retrieval.query.provider_call = saved
            rag.retrieval.search.search_log_create = log
    return times


def search_log_row_ms(writes: int = 300) -> dict[str, float]:
    from permissions.models import User
    from rag.models import SearchLog
    from rag.retrieval.hits import SearchResult
    from rag.retrieval.search_log import search_log_create

    user = User.objects.filter(username__startswith="metrics-bench-").first()
    assert user is not None
    result = SearchResult(hits=[], documents={}, latency=dict(STAGES))

    def as_written() -> None:
        search_log_create(user=user, query="", mode="hybrid", result=result, results=10, degraded=False)

    def autocommit() -> None:
        SearchLog.objects.create(user=user, team_id=user.team_id, mode="hybrid", results=10, latency=result.latency, total_ms=8.8)

    def median_ms(write) -> float:
        times = []
        for _ in range(writes):
            started = time.perf_counter()
            write()
            times.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(times), 3)

    return {"as_written": median_ms(as_written), "autocommit_insert": median_ms(autocommit)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=300, help="searches per arm (on, off)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=20000, help="loops of the metric updates alone")
    args = parser.parse_args()

    updates = micro(args.iterations)
    with tempfile.TemporaryDirectory() as directory:
        # The deployed mode; set before Django (and so prometheus_client) is imported.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings.local",
                "CAIRN_EMBEDDED_DATABASE": DATABASE,
                "RAG_EMBEDDING_PROVIDER": "fake",
                "RAG_EMBEDDING_MODEL": "fake-embedding",
                "API_THROTTLE_USER": "1000000/min",
                "API_THROTTLE_RAG": "1000000/min",
                "REDIS_URL": "",
                "LOG_LEVEL": "WARNING",
                "CELERY_BROKER_URL": "",
            }
        )
        import django

        django.setup()
        token = build_corpus(args.docs)
        times = search_rounds(token, args.searches, args.rounds)
        log_rows = search_log_row_ms()

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {"p50": round(statistics.median(ordered), 3), "p95": round(ordered[int(len(ordered) * 0.95) - 1], 3)}

    report = {
        "metric_updates_per_search_us": {mode: round(us, 2) for mode, us in updates.items()},
        "rag_search_ms": {arm: summary(values) for arm, values in times.items()},
        "search_log_row_ms": log_rows,
        "searches_per_arm": len(times["on"]),
        "docs": args.docs,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
