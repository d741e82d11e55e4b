"""rag.answer server overhead: time from request to first streamed byte, with a mock LLM.

gunicorn serves Cairn in the deployed shape (DEBUG off, gthread workers) on 127.0.0.1; each
request is `POST /api/rag.answer` with `stream: true` and a question not asked before (so the
query embedding is computed, not cached). Reported per mock LLM, p50 and p95 over the requests:

- first byte: the response headers and first body bytes (the first `token` event: retrieval,
  evidence check, prompt and the LLM's first piece are all behind it);
- first token: the first complete `token` event parsed;
- done: the whole stream, through `metadata` and `done` (includes writing the query log).

Mock LLMs: `fake` is Cairn's in-process fake provider (everything but the LLM client);
`stub` is the real LiteLLM client talking to a local OpenAI-compatible server that streams a
canned answer at once (adds LiteLLM's own overhead). The evidence gate is disabled
(RAG_ANSWER_MIN_SCORE=0) so every request takes the generation path; `--keep-evidence-gate`
measures the configured gate instead.

Data, in order of preference:
1. `--database DB --token TOKEN` (the measured user's API token);
2. `--latency-corpus` (default var/bench-latency.json): `{"database", "token"}` written by
   bench/latency.py from 100k chunks up (local MiniLM embeddings; run that first for the figure
   docs/benchmarks.md reports);
3. otherwise a small corpus this script builds in `cairn_bench_answers` (SciFact abstracts when
   the dataset is present, else synthetic documents), indexed with the fake embedding provider
   unless `--embedding-provider local`.
The questions are SciFact's claims, by default from ../shared/datasets/scifact beside the repository
(`--dataset`, or the SCIFACT_DIR environment variable); synthetic ones when it is missing.
Takes: a few minutes (two servers, 220 answers each).

Reproduce:  .venv/bin/python bench/answer_ttfb.py                      (whatever corpus exists)
            .venv/bin/python bench/answer_ttfb.py --database cairn_bench_latency_100000 --token cairn_...
            .venv/bin/python bench/answer_ttfb.py --standalone --docs 500
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The shared datasets sit beside the repository; SCIFACT_DIR points elsewhere.
DATASET = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "datasets" / "scifact"))
STANDALONE_DATABASE = "cairn_bench_answers"
LATENCY_CORPUS = ROOT / "var" / "bench-latency.json"
STUB_ANSWER = ["The passages ", "say so ", "[1]", ", and more ", "[2]", "."]


def setup_django(database: str, embedding: dict[str, str]) -> None:
    os.environ["CAIRN_EMBEDDED_DATABASE"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ.update(embedding)
    import django

    django.setup()


def build_standalone(dataset: Path, docs: int) -> dict:
    """A small corpus: one team, five collections, a reader who sees two of them."""
    from django.core.management import call_command
    from django.utils import timezone

    from documents.models import Collection, CollectionMembership, Document
    from permissions.models import Access, Role, Team, TokenScope, User
    from permissions.services import api_token_create
    from rag.indexing.pipeline import index_documents
    from rag.models import Chunk

    call_command("migrate", verbosity=0)
    team = Team.objects.filter(name="Answer bench").first()
    if team is None or not Chunk.objects.filter(team=team).exists() or Document.objects.filter(team=team).count() != docs:
        if team:
            team.delete()
        team = Team.objects.create(name="Answer bench")
        reader = User.objects.create(username=f"answer-reader-{team.pk.hex[:6]}", team=team)
        collections = [Collection.objects.create(team=team, name=f"C{i}", default_access=Access.NONE) for i in range(5)]
        for collection in collections[:2]:
            CollectionMembership.objects.create(collection=collection, user=reader, role=Role.READ)
        now = timezone.now()
        texts = source_texts(dataset, docs)
        created = Document.objects.bulk_create(
            [
                Document(team=team, collection=collections[i % 5], title=title, text=text, created_by=reader, published_at=now)
                for i, (title, text) in enumerate(texts)
            ]
        )
        started = time.perf_counter()
        index_documents(document_ids=[d.pk for d in created])
        print(f"  indexed {len(created)} documents in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    reader = User.objects.filter(team=team).earliest("date_joined")  # made above with the team
    token = api_token_create(user=reader, scope=TokenScope.READ, name="answer bench").plaintext
    return {"database": STANDALONE_DATABASE, "token": token}


def source_texts(dataset: Path, docs: int) -> list[tuple[str, str]]:
    if (dataset / "corpus.jsonl").exists():
        rows = [json.loads(line) for _, line in zip(range(docs), (dataset / "corpus.jsonl").open(), strict=False)]
        return [(row["title"][:500] or row["_id"], row["text"]) for row in rows]
    rng = random.Random(5)
    words = (
        "owl volcano glacier bee comet river forest deploy rollback vacation laptop policy "
        "network database index cache latency answer citation passage evidence"
    ).split()
    return [(f"Document {i}", "\n\n".join(" ".join(rng.choices(words, k=40)) + "." for _ in range(4))) for i in range(docs)]


def questions(dataset: Path, count: int) -> list[str]:
    if (dataset / "queries.jsonl").exists():
        found = [json.loads(line)["text"] for line in (dataset / "queries.jsonl").open()]
        if len(found) >= count:
            return found[:count]
    rng = random.Random(9)
    words = "owl volcano glacier bee comet river forest deploy rollback vacation laptop policy network database".split()
    return [f"what about {' '.join(rng.sample(words, 3))} number {i}?" for i in range(count)]


class StubLLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that streams a canned answer immediately."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = (
            "".join(
                "data: "
                + json.dumps(
                    {
                        "id": "stub",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "stub",
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                    }
                )
                + "\n\n"
                for piece in STUB_ANSWER
            )
            + "data: [DONE]\n\n"
        )
        payload = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def start_server(database: str, env_extra: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    env = {
        **os.environ,
        "CAIRN_EMBEDDED_DATABASE": database,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "false",
        "API_THROTTLE_USER": "1000000/min",
        "API_THROTTLE_RAG": "1000000/min",
        "LOG_LEVEL": "WARNING",
        **env_extra,
    }
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--worker-class",
            "gthread",
            "--threads",
            "4",
            "--preload",
            "--log-level",
            "info",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=log,
        stderr=log,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited:\n{log_path.read_text()[-3000:]}")
        match = re.search(r"Listening at: http://(127\.0\.0\.1:\d+)", log_path.read_text())
        if match:
            try:
                conn = http.client.HTTPConnection(match.group(1), timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return process, match.group(1)
            except OSError:
                pass
        time.sleep(0.2)
    stop_server(process)
    raise SystemExit("the server did not start")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(20)


def one_request(conn: http.client.HTTPConnection, token: str, query: str, limit: int) -> dict:
    body = json.dumps({"query": query, "stream": True, "limit": limit})
    started = time.perf_counter()
    conn.request(
        "POST",
        "/api/rag.answer",
        body=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "text/event-stream"},
    )
    response = conn.getresponse()
    timing: dict = {"status": response.status}
    buffer, first_byte = b"", None
    while True:
        chunk = response.read1(65536)
        if not chunk:
            break
        if first_byte is None:
            first_byte = time.perf_counter()
        buffer += chunk
        if "first_token" not in timing and b"event: token\ndata: " in buffer and b"\n\n" in buffer.split(b"event: token\n", 1)[1]:
            timing["first_token"] = (time.perf_counter() - started) * 1000
    timing["done"] = (time.perf_counter() - started) * 1000
    timing["first_byte"] = ((first_byte or time.perf_counter()) - started) * 1000
    events = re.findall(rb"event: (\w+)\ndata: (.*)\n\n", buffer)
    last = json.loads(events[-1][1]) if events else {}
    timing["event"] = events[-1][0].decode() if events else "none"
    timing["mode"] = last.get("mode", last.get("error", "?"))
    timing["id"] = last.get("id")
    timing["server"] = last.get("latency", {})
    return timing


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(address: str, token: str, warmup: list[str], measured: list[str], limit: int) -> dict:
    conn = http.client.HTTPConnection(address, timeout=60)
    for query in warmup:  # load the model in both workers, import litellm, open connections
        one_request(conn, token, query, limit)
    runs = [one_request(conn, token, query, limit) for query in measured]
    bad = [r for r in runs if r["status"] != 200 or r["event"] != "done"]
    if bad:
        raise SystemExit(f"{len(bad)} failed requests, e.g. {bad[0]}")
    result = {
        "n": len(runs),
        "modes": {m: sum(r["mode"] == m for r in runs) for m in {r["mode"] for r in runs}},
        "ids": [r["id"] for r in runs],
    }
    for key in ("first_byte", "first_token", "done"):
        values = [r[key] for r in runs if key in r]
        result[key] = {"p50": statistics.median(values), "p95": percentile(values, 0.95)} if values else None
    # The server's own split (from the view's start, so without auth and routing), medians.
    keys = sorted({k for r in runs for k in r["server"]})
    result["server_p50"] = {k: statistics.median([r["server"][k] for r in runs if k in r["server"]]) for k in keys}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", help="embedded database of an existing corpus (with --token)")
    parser.add_argument("--token", help="API token of the measured user")
    parser.add_argument(
        "--latency-corpus",
        type=Path,
        default=LATENCY_CORPUS,
        help="the corpus bench/latency.py left, used when no --database is given (default: %(default)s)",
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=DATASET,
        help="BEIR SciFact's folder: the questions, and the standalone corpus's texts (default: %(default)s)",
    )
    parser.add_argument(
        "--standalone", action="store_true", help="build and use the small corpus even if bench-latency.json exists"
    )
    parser.add_argument("--docs", type=int, default=500, help="documents in the standalone corpus")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--limit", type=int, default=5, help="passages per answer")
    parser.add_argument("--llm", choices=["fake", "stub", "both"], default="both")
    parser.add_argument("--embedding-provider", help="default: local for an existing corpus, fake for the standalone one")
    parser.add_argument("--embedding-model")
    parser.add_argument("--embedding-dimension", default="384")
    parser.add_argument("--keep-evidence-gate", action="store_true")
    args = parser.parse_args()

    if args.database and args.token and not args.standalone:
        corpus, source = {"database": args.database, "token": args.token}, "given"
    elif args.latency_corpus.exists() and not args.standalone:
        corpus, source = json.loads(args.latency_corpus.read_text()), str(args.latency_corpus)
    else:
        corpus, source = None, "standalone"
    provider = args.embedding_provider or corpus and corpus.get("embedding_provider") or ("fake" if corpus is None else "local")
    model = (
        args.embedding_model
        or (corpus or {}).get("embedding_model")
        or ("fake-embedding" if provider == "fake" else "all-MiniLM-L6-v2")
    )
    embedding = {
        "RAG_EMBEDDING_PROVIDER": provider,
        "RAG_EMBEDDING_MODEL": model,
        "RAG_EMBEDDING_DIMENSION": args.embedding_dimension,
    }
    setup_django(corpus["database"] if corpus else STANDALONE_DATABASE, embedding)
    if corpus is None:
        corpus = build_standalone(args.dataset, args.docs)
    from permissions.models import ApiToken
    from permissions.tokens import token_prefix
    from rag.models import Chunk, QueryLog

    token_row = ApiToken.objects.select_related("user").get(prefix=token_prefix(corpus["token"]))
    team_id = token_row.user.team_id
    # A user without a team has no chunks.
    chunks = Chunk.objects.filter(team_id=team_id, model_id=model).count() if team_id is not None else 0
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(
        f"corpus: {source}, database {corpus['database']}, {chunks} chunks of {model} in the user's team, user {token_row.user.username}"
    )

    all_questions = questions(args.dataset, args.warmup + 2 * args.requests)
    gate = {} if args.keep_evidence_gate else {"RAG_ANSWER_MIN_SCORE": "0"}
    stub = ThreadingHTTPServer(("127.0.0.1", 0), StubLLM)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    llms = {
        "fake": {"RAG_LLM_PROVIDER": "fake", "RAG_LLM_MODEL": "fake-llm", "RAG_FAKE_LLM_DELAY": "0"},
        "stub": {
            "RAG_LLM_PROVIDER": "litellm",
            "RAG_LLM_MODEL": "openai/stub",
            "RAG_LLM_API_KEY": "stub",
            "RAG_LLM_BASE_URL": f"http://127.0.0.1:{stub.server_address[1]}/v1",
        },
    }
    chosen = ["fake", "stub"] if args.llm == "both" else [args.llm]
    (ROOT / "var").mkdir(exist_ok=True)
    results = {}
    for i, name in enumerate(chosen):
        server, address = start_server(
            corpus["database"], {**embedding, **gate, **llms[name]}, ROOT / "var" / f"bench-answer-{name}.log"
        )
        try:
            # Disjoint questions per mock LLM: neither run profits from the other's query-embedding cache.
            offset = args.warmup + i * args.requests
            results[name] = measure(
                address, corpus["token"], all_questions[: args.warmup], all_questions[offset : offset + args.requests], args.limit
            )
        finally:
            stop_server(server)
    stub.shutdown()
    QueryLog.objects.filter(pk__in=[i for r in results.values() for i in r.pop("ids") if i]).delete()
    for name, result in results.items():
        line = "  ".join(
            f"{key} p50 {result[key]['p50']:.1f} ms p95 {result[key]['p95']:.1f} ms"
            for key in ("first_byte", "first_token", "done")
            if result[key]
        )
        print(f"[{name:4s} LLM] n={result['n']} modes={result['modes']}  {line}")
        print("           server-side p50: " + ", ".join(f"{k} {v:.1f}" for k, v in result["server_p50"].items()))
    (ROOT / "var" / "bench-answer-ttfb.json").write_text(
        json.dumps({"corpus": source, "chunks": chunks, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
