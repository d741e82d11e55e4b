"""Cold start of the web server: from its start to the first answered search, and each process's first searches.

Serves as bench/latency.py does (`python -m config.serve`, what `make run` runs, DEBUG off) the corpus that
bench/latency.py built for `--chunks` (run that first), then, as its reader over HTTP:

- *ready*: from starting the process to `/health` answering (imports, settings, the broker started, the
  embedded PostgreSQL's address, each gunicorn worker loading the app);
- *first answer*: from starting the process to the first hybrid `rag.search` answered;
- the first searches one by one (new connections, so several workers are reached), against the median
  of 20 warm ones: what loading the embedding model and the first queries' caches cost.

Data: the corpus bench/latency.py built for `--chunks` (its var/bench-latency-<n>.json names the reader's
token), and SciFact's claims as queries, by default from ../shared/datasets/scifact beside the repository
(`--dataset`, or the SCIFACT_DIR environment variable).
Takes: under a minute a run.

Reproduce:  .venv/bin/python bench/cold_start.py --chunks 100000 --runs 3
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

from latency import DATASET, database_name, free_port, load_queries, start_server, stop_serve  # noqa: E402


def search(port: int, token: str, query: str) -> float:
    import httpx

    started = time.perf_counter()
    response = httpx.post(
        f"http://127.0.0.1:{port}/api/rag.search",
        json={"query": query, "limit": 10, "threshold": 0},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    if response.status_code != 200:
        raise SystemExit(f"HTTP {response.status_code}: {response.text[:300]}")
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="the bench/latency.py corpus to serve")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder, for its claims (default: %(default)s)"
    )
    args = parser.parse_args()
    corpus_file = ROOT / "var" / f"bench-latency-{args.chunks}.json"
    if not corpus_file.exists():
        sys.exit(f"No corpus of {args.chunks} chunks: run bench/latency.py --chunks {args.chunks} first.")
    token = json.loads(corpus_file.read_text())["token"]
    queries = load_queries(args.dataset)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    for run in range(1, args.runs + 1):
        port = free_port()
        started = time.perf_counter()
        server = start_server(database_name(args.chunks), port)
        ready = (time.perf_counter() - started) * 1000
        try:
            first = [search(port, token, queries[run * 40 + i]) for i in range(4)]
            answered = ready + first[0]
            warm = statistics.median(search(port, token, queries[run * 40 + 4 + i]) for i in range(20))
        finally:
            stop_serve(server)
        print(
            f"run {run}: ready {ready:.0f} ms, first answer {answered:.0f} ms after start; first searches "
            f"{', '.join(f'{ms:.0f}' for ms in first)} ms; warm median {warm:.1f} ms"
        )


if __name__ == "__main__":
    main()
