"""The answer cache over HTTP: a repeated question's `rag.answer`, against Cairn as `make run` serves it.

It starts `python -m config.serve --demo` (what `make run` runs: the embedded PostgreSQL, its own
Redis, gunicorn with WEB_WORKERS gthread processes, a Celery worker and beat) on its own database
(`cairn_bench_answer_cache`) and run directory (var/bench-answer-cache/), waits until the worker
has indexed the demo documents with the local MiniLM model, then, as alice (the demo token) over
one keep-alive connection, for each of the /rag page's example questions:

- asks it once (the first, uncached answer: retrieval, evidence, extraction or generation);
- asks it again `--repeats` times as JSON and `--repeats` times with `stream: true` (read to the
  `done` event), every one of which must come back `cached: true`.

Reported: p50 and p95 of the repeated answers (JSON, and streamed to `done`), and of the first ones,
in milliseconds from sending the request to the last byte of the response. The server's `cacheMs`
(from the view's start to the checked hit) is reported too, and the floor any `rag.answer` pays
before answering (routing, token authentication, throttles, validation): a request refused as invalid. `API_THROTTLE_RAG` is raised so the run
is not rate limited; the throttles still run, in Redis, on every request, over a one-second window
(DRF keeps every request of the window in a list it reads and writes each time: a one-minute window
at this rate would hold thousands, where `make run`'s 120/min holds at most 120).

LLM: none by default (extractive answers, as `make run` without a key); `--llm stub` answers
through the real LiteLLM client from a local OpenAI-compatible server that waits `--stub-delay`
seconds before streaming (a stand-in for a model's latency, which the cache saves).

Data: the demo documents (documents/demo/) that `--demo` loads; nothing to download.
Takes: about a minute (the server's start and the demo's indexing, then 4 x (1 + 2 x repeats) answers).

Reproduce:  .venv/bin/python bench/answer_cache.py
            .venv/bin/python bench/answer_cache.py --llm stub --repeats 200
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE = "cairn_bench_answer_cache"
RUN_DIR = ROOT / "var" / "bench-answer-cache"
QUESTIONS = [
    "How many vacation days do I get?",
    "How do I roll back a deployment?",
    "What should I do if I lose my laptop?",
    "When are the core hours for remote work?",
]


class StubLLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that waits `delay` seconds, then streams a canned answer citing [1]."""

    protocol_version = "HTTP/1.1"
    delay = 0.5

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.delay)
        chunks = [
            {"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "stub", "choices": [choice]}
            for choice in (
                {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                for piece in ("The passages ", "answer this ", "[1].")
            )
        ]
        payload = ("".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_serve(port: int, env_extra: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`python -m config.serve --demo` on its own database and run directory; returns it and alice's token."""
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    log_path = RUN_DIR / "serve.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "CAIRN_EMBEDDED_DATABASE": DATABASE,
        "CAIRN_RUN_DIR": str(RUN_DIR),
        "CELERY_BROKER_URL": "",
        "REDIS_URL": "",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "API_THROTTLE_USER": "1000000/s",
        "API_THROTTLE_RAG": "1000000/s",
        **env_extra,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "config.serve", "--demo", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if process.poll() is not None:
            raise SystemExit(f"config.serve exited with {process.returncode}:\n{text[-3000:]}")
        token = re.search(r"API token: (cairn_\S+)", text)
        if token and "Cairn is serving" in text:
            return process, token.group(1)
        time.sleep(0.5)
    stop_serve(process)
    raise SystemExit(f"config.serve did not start:\n{log_path.read_text(errors='replace')[-3000:]}")


def stop_serve(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # the supervisor stops its children, as Ctrl-C would
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def post(conn: http.client.HTTPConnection, token: str, endpoint: str, body: dict) -> tuple[float, int, bytes]:
    """(milliseconds to the last byte, status, body)."""
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if body.get("stream"):
        headers["Accept"] = "text/event-stream"
    conn.request("POST", f"/api/{endpoint}", body=json.dumps(body), headers=headers)
    response = conn.getresponse()
    payload = response.read()
    return (time.perf_counter() - started) * 1000, response.status, payload


def answer_of(payload: bytes, streamed: bool) -> dict:
    if not streamed:
        return json.loads(payload)["data"]
    done = re.findall(rb"event: done\ndata: (.*)\n\n", payload)
    if not done:
        raise SystemExit(f"a stream without a done event: {payload[-500:]!r}")
    return json.loads(done[-1])


def wait_indexed(conn: http.client.HTTPConnection, token: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, status, payload = post(conn, token, "rag.status", {})
        data = json.loads(payload).get("data", {}) if status == 200 else {}
        if data and data["documents"] and data["indexed"] == data["documents"]:
            return data
        time.sleep(1)
    raise SystemExit("the demo documents were not indexed in time")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms  (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100, help="repeated asks per question and format")
    parser.add_argument("--llm", choices=["none", "stub"], default="none")
    parser.add_argument("--stub-delay", type=float, default=0.5, help="seconds the stub LLM waits before answering")
    args = parser.parse_args()

    env_extra: dict[str, str] = {}
    stub = None
    if args.llm == "stub":
        StubLLM.delay = args.stub_delay
        stub = ThreadingHTTPServer(("127.0.0.1", 0), StubLLM)
        threading.Thread(target=stub.serve_forever, daemon=True).start()
        env_extra = {
            "RAG_LLM_PROVIDER": "litellm",
            "RAG_LLM_MODEL": "openai/stub",
            "RAG_LLM_API_KEY": "stub",
            "RAG_LLM_BASE_URL": f"http://127.0.0.1:{stub.server_address[1]}/v1",
        }

    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"date: {datetime.now(UTC).isoformat(timespec='seconds')}  cores: {os.cpu_count()}  load: {os.getloadavg()}")
    port = free_port()
    serve, token = start_serve(port, env_extra)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        status = wait_indexed(conn, token)
        print(
            f"server: python -m config.serve --demo on 127.0.0.1:{port}; {status['documents']} documents, {status['chunks']} chunks"
        )
        # Warm-up: load the model and open the database connections in the worker this connection reaches.
        for n in range(5):
            post(conn, token, "rag.answer", {"query": f"warm-up question number {n} about the office"})
        first: list[float] = []
        repeated: dict[str, list[float]] = {"json": [], "stream": []}
        cache_ms: list[float] = []
        modes: dict[str, int] = {}
        for question in QUESTIONS:
            ms, code, payload = post(conn, token, "rag.answer", {"query": question})
            if code != 200:
                raise SystemExit(f"{question!r}: {code} {payload[:300]!r}")
            fresh = answer_of(payload, streamed=False)
            if fresh["cached"]:
                raise SystemExit(f"{question!r} was cached before it was asked: is another run's cache around?")
            first.append(ms)
            modes[fresh["mode"]] = modes.get(fresh["mode"], 0) + 1
            for kind in ("json", "stream"):
                for _ in range(args.repeats):
                    ms, code, payload = post(conn, token, "rag.answer", {"query": question, "stream": kind == "stream"})
                    answer = answer_of(payload, streamed=kind == "stream")
                    if code != 200 or not answer["cached"] or answer["answer"] != fresh["answer"]:
                        raise SystemExit(f"{question!r} repeated: {code}, cached={answer.get('cached')}")
                    repeated[kind].append(ms)
                    cache_ms.append(answer["latency"]["cacheMs"])
        # The floor every rag.answer pays before any answering: routing, authentication (a token lookup),
        # the throttles and input validation, measured on a request refused as invalid (400).
        floor = []
        for _ in range(args.repeats):
            ms, code, _ = post(conn, token, "rag.answer", {"query": "x"})
            assert code == 400, code
            floor.append(ms)
        print(f"answers: {modes} (LLM: {args.llm})")
        print(f"first (uncached) answer          {summary(first)}")
        print(f"repeated, JSON                   {summary(repeated['json'])}")
        print(f"repeated, stream: true (to done) {summary(repeated['stream'])}")
        print(f"server cacheMs (view to hit)     {summary(cache_ms)}")
        print(f"floor: a refused rag.answer (400) {summary(floor)}")
        print(f"load after: {os.getloadavg()}")
    finally:
        stop_serve(serve)
        if stub is not None:
            stub.shutdown()


if __name__ == "__main__":
    main()
