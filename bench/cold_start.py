"""Cold start of `make run`: from its start to the first answered search, each process's first searches, the first LLM answer.

Default (the demo): what `make run` does a second time on its existing var/: `python -m config.serve --demo` on a
state directory of its own (bench/footprint.py's, where the demo is indexed on the first start), stopped and
started again for each run. Measured over HTTP, as a client that starts polling when the command starts:

- *ready*: from the start to `/health` answering 200 (the embedded PostgreSQL and the broker started, migrate,
  the demo checked, gunicorn's workers up);
- *first search*: from the start to the first `rag.search` answered;
- the first searches one by one (new connections, so several web workers are reached), against the median of
  20 warm ones: what a process's first search pays (the model, the tokenizer, first queries' caches);
- with an LLM configured (a local OpenAI-compatible stub, through LiteLLM, started again): the first `rag.answer`
  and the next few on new connections against the median of 10 warm ones: what LiteLLM's import would cost a request.

`--baseline DIR` measures another checkout (a clone of main with its venv) the same way in the same run,
alternating with this one; medians over `--runs`, and the ratios. The machine's load is printed: on a shared
machine the times move with it, the ratios less.

`--chunks N` instead serves the corpus bench/latency.py built for N chunks (run that first) with SciFact's
claims as queries (`--dataset`, or SCIFACT_DIR): ready, first answer, first searches and warm median.
Takes: about a minute a run and checkout on the demo (twice that loaded).

Reproduce:  .venv/bin/python bench/cold_start.py --baseline ../main-clone --runs 3
            .venv/bin/python bench/cold_start.py --chunks 100000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answer_ttfb import StubLLM  # noqa: E402
from footprint import DEMO_QUERIES, Serve, python_of  # noqa: E402
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


def corpus_main(args: argparse.Namespace) -> None:
    corpus_file = ROOT / "var" / f"bench-latency-{args.chunks}.json"
    if not corpus_file.exists():
        sys.exit(f"No corpus of {args.chunks} chunks: run bench/latency.py --chunks {args.chunks} first.")
    token = json.loads(corpus_file.read_text())["token"]
    queries = load_queries(args.dataset)
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


def ready_and_first_search(serve: Serve, query: str, timeout: float = 300) -> tuple[float, float]:
    """Seconds from the start until /health answered 200, and until a `rag.search` did, polling both as a client would."""
    ready = 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        serve._check_alive()
        try:
            if not ready and httpx.get(f"{serve.url}/health", timeout=2).status_code == 200:
                ready = time.perf_counter() - serve.started_at
            if not serve.token:
                found = re.search(r"API token: (\S+)", serve.log())
                serve.token = found.group(1) if found else ""
            if serve.token and serve.post("rag.search", {"query": query, "limit": 10}, timeout=30).status_code == 200:
                return ready or time.perf_counter() - serve.started_at, time.perf_counter() - serve.started_at
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{serve.checkout}: no search answered in {timeout:.0f} s:\n{serve.log()[-3000:]}")


def answer(serve: Serve, query: str) -> float:
    started = time.perf_counter()
    response = serve.post("rag.answer", {"query": query})
    body = response.json()
    if response.status_code != 200 or (body.get("data") or {}).get("mode") not in (None, "generated"):
        raise SystemExit(f"rag.answer answered {response.status_code}: {response.text[:300]}")
    return (time.perf_counter() - started) * 1000


def demo_run(checkout: Path, python: Path, llm: dict[str, str]) -> dict[str, float]:
    """One warm restart without an LLM (ready, first search, first searches vs warm), one with (first answers vs warm)."""
    figures: dict[str, float] = {}
    serve = Serve(checkout, python).start()
    try:
        figures["ready s"], figures["first search s"] = ready_and_first_search(serve, DEMO_QUERIES[0])
        first = [serve.search(DEMO_QUERIES[i % len(DEMO_QUERIES)] + f" ({i})") for i in range(1, 5)]
        warm = statistics.median(serve.search(DEMO_QUERIES[i % len(DEMO_QUERIES)] + f" [{i}]") for i in range(20))
        figures["slowest first search / warm"] = max(first) / warm
        figures["warm search ms"] = warm
    finally:
        serve.stop()
    serve = Serve(checkout, python, extra_env={**llm, "RAG_ANSWER_MIN_SCORE": "0"}).start()
    try:
        serve.demo_token()
        serve.wait_ready()
        first = [answer(serve, DEMO_QUERIES[i % len(DEMO_QUERIES)] + f" <{i}>") for i in range(3)]
        warm = statistics.median(answer(serve, DEMO_QUERIES[i % len(DEMO_QUERIES)] + f" {{{i}}}") for i in range(10))
        figures["first LLM answer ms"] = first[0]
        figures["slowest first answer / warm"] = max(first) / warm
        figures["warm answer ms"] = warm
    finally:
        serve.stop()
    return figures


def demo_main(args: argparse.Namespace) -> None:
    stub = ThreadingHTTPServer(("127.0.0.1", 0), StubLLM)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    llm = {
        "RAG_LLM_PROVIDER": "litellm",
        "RAG_LLM_MODEL": "openai/stub",
        "RAG_LLM_API_KEY": "stub",
        "RAG_LLM_BASE_URL": f"http://127.0.0.1:{stub.server_address[1]}/v1",
    }
    checkouts = {"this": (args.checkout.resolve(), args.venv)}
    if args.baseline:
        checkouts["baseline"] = (args.baseline.resolve(), args.baseline_venv)
    pythons = {label: python_of(path, venv) for label, (path, venv) in checkouts.items()}
    for label, (path, _) in checkouts.items():  # the demo indexed once, so every run is a warm restart
        if not (path / "var" / "bench-footprint" / "postgres").exists():
            print(f"{label}: first start, indexing the demo", flush=True)
            serve = Serve(path, pythons[label]).start()
            try:
                serve.demo_token()
                serve.wait_ready()
                serve.wait_indexed()
            finally:
                serve.stop()
    results: dict[str, list[dict[str, float]]] = {label: [] for label in checkouts}
    for run in range(1, args.runs + 1):
        for label in reversed(list(checkouts)):  # the baseline first
            figures = demo_run(checkouts[label][0], pythons[label], llm)
            results[label].append(figures)
            print(
                f"run {run} {label} (load {os.getloadavg()[0]:.1f}): " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()),
                flush=True,
            )
    print(f"\nmedians of {args.runs} run(s):")
    names = list(results["this"][0])
    medians = {label: {n: statistics.median(r[n] for r in runs) for n in names} for label, runs in results.items()}
    print(f"  {'':32} {'this':>9}" + (f" {'baseline':>9} {'ratio':>7}" if "baseline" in medians else ""))
    for name in names:
        line = f"  {name:32} {medians['this'][name]:>9.2f}"
        if "baseline" in medians:
            line += f" {medians['baseline'][name]:>9.2f} {medians['this'][name] / medians['baseline'][name]:>7.2f}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, help="serve the bench/latency.py corpus of this many chunks instead of the demo")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder, for its claims (default: %(default)s)"
    )
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    parser.add_argument("--venv", default=".venv", help="its venv, relative to it; with LiteLLM (default: %(default)s)")
    parser.add_argument("--baseline", type=Path, help="another checkout (a clone of main) measured in the same run")
    parser.add_argument("--baseline-venv", default=".venv", help="the baseline's venv, relative to it (default: %(default)s)")
    args = parser.parse_args()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")
    if args.chunks:
        corpus_main(args)
    else:
        demo_main(args)


if __name__ == "__main__":
    main()
