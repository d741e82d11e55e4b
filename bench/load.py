"""Mixed load against a running Cairn: N clients searching, asking, creating and updating for a fixed time.

Each client loops over a weighted mix — rag.search (hybrid) 50%, rag.answer 20%, documents.create
15% (with an Idempotency-Key), documents.update of a document it created 15% — with questions drawn
from the demo corpus's topics, so the query-embedding cache rarely hits. Reports requests, errors
(any response that is not 200, or a transport error) and p50/p95/p99 latency per operation and
overall. Start the server with throttles raised, or the throttles are what is measured; `--demo`
prints alice's token:

    API_THROTTLE_USER=1000000/min API_THROTTLE_RAG=1000000/min API_THROTTLE_ANON=1000000/min \
      .venv/bin/python -m config.serve --demo --bind 127.0.0.1:8765

Data: the server's own (start from a fresh database with the demo documents); the questions and the
documents written are generated from a list of the demo's topics.
Takes: `--seconds` (default 60), plus the clients' last requests.

Reproduce:  .venv/bin/python bench/load.py --url http://127.0.0.1:8765 --token cairn_... --clients 16 --seconds 60
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import uuid
from collections import defaultdict

import httpx

TOPICS = [
    "deploy", "roll back a release", "on-call rotation", "security training", "remote work", "onboarding",
    "incident response", "password manager", "VPN", "expenses", "holidays", "code review", "CI pipeline",
    "production database", "laptop setup", "first week", "pager escalation", "Friday deployments",
]  # fmt: skip
MIX = [("search", 50), ("answer", 20), ("create", 15), ("update", 15)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class Client(threading.Thread):
    def __init__(self, n: int, url: str, token: str, collection_id: str, until: float, results: dict) -> None:
        super().__init__(daemon=True)
        self.n, self.until, self.results, self.collection_id = n, until, results, collection_id
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.random = random.Random(n)
        self.mine: list[str] = []

    def run(self) -> None:
        operations = [name for name, weight in MIX for _ in range(weight)]
        count = 0
        while time.monotonic() < self.until:
            operation = self.random.choice(operations)
            if operation == "update" and not self.mine:
                operation = "create"
            count += 1
            topic = self.random.choice(TOPICS)
            question = f"How do we handle {topic}? ({self.n}-{count})"
            request: tuple[str, dict, dict[str, str]]
            if operation == "search":
                request = ("/api/rag.search", {"query": question, "limit": 10}, {})
            elif operation == "answer":
                request = ("/api/rag.answer", {"query": question}, {})
            elif operation == "create":
                body = {
                    "title": f"Load note {self.n}-{count}",
                    "text": f"# Notes on {topic}\n\n" + f"What we learned about {topic} this week. " * 30,
                    "collectionId": self.collection_id,
                    "publish": True,
                }
                request = ("/api/documents.create", body, {"Idempotency-Key": str(uuid.uuid4())})
            else:
                body = {"id": self.random.choice(self.mine), "text": f"# Revised {topic}\n\n" + f"Update {count}. " * 40}
                request = ("/api/documents.update", body, {})
            started = time.perf_counter()
            try:
                response = self.http.post(request[0], json=request[1], headers=request[2])
                ok = response.status_code == 200
                if ok and operation == "create":
                    self.mine.append(response.json()["data"]["id"])
            except httpx.HTTPError:
                ok = False
            elapsed = (time.perf_counter() - started) * 1000
            self.results[operation].append((elapsed, ok))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--collection", help="collection id to create in (default: the first writable one listed)")
    args = parser.parse_args()
    http = httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {args.token}"}, timeout=30)
    collection_id = args.collection or http.post("/api/collections.list", json={}).json()["data"][0]["id"]
    results: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    until = time.monotonic() + args.seconds
    clients = [Client(n, args.url, args.token, collection_id, until, results) for n in range(args.clients)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(args.seconds + 120)
    everything = [r for rs in results.values() for r in rs]
    print(f"{args.clients} clients, {args.seconds:.0f} s, {len(everything)} requests ({len(everything) / args.seconds:.1f}/s)")
    print(f"{'operation':10} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name, rows in [*sorted(results.items()), ("all", everything)]:
        times = [t for t, _ in rows]
        errors = sum(1 for _, ok in rows if not ok)
        print(
            f"{name:10} {len(rows):8d} {errors:6d} {statistics.median(times):8.1f} "
            f"{percentile(times, 0.95):8.1f} {percentile(times, 0.99):8.1f}"
        )


if __name__ == "__main__":
    main()
