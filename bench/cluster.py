"""A multi-node run on this machine: a web server, a worker and the replica killed under mixed load, nothing lost.

Starts a primary PostgreSQL (embedded) and a hot standby streaming from it (pg_basebackup, config.embedded_db.standby),
Redis, two gunicorn web servers on their own ports reading from the standby (DATABASE_REPLICA_URLS), a Celery worker
per queue (-Q interactive, -Q bulk), beat, and Milvus Lite with --vector-backend milvus. Loads the demo corpus plus
--corpus generated documents (one import), then drives --clients threads for --seconds across both web servers:
rag.search (hybrid) 45%, rag.answer 15%, documents.update of the client's own documents 25%, documents.info 15%,
while an import of --import-files files runs and a prober edits one document every few seconds and times how long
until a keyword search finds the edit. A client that gets no answer or a 5xx from one web server retries on the other.
During the run it kills (SIGKILL) web server 1, the bulk worker (mid-import), the standby and the interactive worker
(with the edits it had taken); a supervisor restarts the web server and the workers at once, and the standby a few
seconds later. The prober lists each edit slower than 5 s with when it was written, beside the kills. At the end it waits for the import and the
indexing to settle and checks every acknowledged edit: the document holds its last text, and its chunks are indexed.

Reports throughput, p50/p95 and errors per kind, retries, the edit-to-searchable figures, lost writes, and the kills.
Data: the demo documents and generated Markdown (topics from bench/load.py), under var/cluster (wiped at start).
Takes: about --seconds plus 1-3 minutes to start, load the corpus and let the import finish.

Reproduce:  .venv/bin/python bench/cluster.py --seconds 90 --clients 6 --import-files 2000
            .venv/bin/python bench/cluster.py --vector-backend milvus --seconds 90 --clients 6 --import-files 2000
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import random
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import threading
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The project (config, the apps) and the sibling script whose topics and percentile this reuses.
sys.path[:0] = [str(ROOT), str(HERE)]

from load import TOPICS, percentile  # noqa: E402

WORK = ROOT / "var" / "cluster"
# Writers (alice's tokens, one each) edit their own documents between reads; readers (bob's token) only read. A
# client that wrote reads the primary for DATABASE_REPLICA_PIN_SECONDS, so the readers are the replica's load.
WRITER_MIX = [("search", 40), ("answer", 15), ("edit", 30), ("info", 15)]
READER_MIX = [("search", 55), ("answer", 25), ("info", 20)]
KINDS = ["search", "answer", "edit", "info"]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def word(rng: random.Random, n: int = 10) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


def markdown(rng: random.Random, n: int) -> str:
    topics = rng.sample(TOPICS, 3)
    paragraphs = [
        f"{topic.capitalize()} is covered in note {n}. Ask the {rng.choice(TOPICS)} owner before changing how we handle it."
        for topic in topics
    ]
    return f"# Note {n}: {topics[0]}\n\n" + "\n\n".join(paragraphs) + "\n"


@dataclass
class Process:
    """One node: started in its own session, killed with its children, restarted by the supervisor."""

    name: str
    argv: list[str]
    env: dict[str, str]
    supervised: bool = True
    ready_url: str = ""
    process: subprocess.Popen | None = None
    restarts: int = 0

    def start(self) -> Process:
        out = (WORK / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            self.argv, env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        if self.ready_url:
            wait_http(self.ready_url, self.process)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.supervised = False
        self.signal(signal.SIGTERM)
        if self.process is not None:
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait(10)


def wait_http(url: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited ({process.returncode})")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


class Supervisor(threading.Thread):
    """What systemd or Kubernetes does: starts a dead node again."""

    def __init__(self, processes: list[Process]) -> None:
        super().__init__(daemon=True)
        self.processes = processes
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.5):
            for p in self.processes:
                if p.supervised and not p.alive():
                    log(f"supervisor: {p.name} is down; starting it again")
                    p.restarts += 1
                    try:
                        p.start()
                        log(f"supervisor: {p.name} is back")
                    except RuntimeError as exc:
                        log(f"supervisor: {p.name} failed to start: {exc}")


@dataclass
class Stats:
    # (when it was answered, milliseconds) per kind: the report splits them at the first kill.
    latencies: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    retries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Api:
    """A client of both web servers: a request that gets no answer or a 5xx is sent again to the other one."""

    def __init__(self, urls: list[str], token: str, stats: Stats, start: int = 0) -> None:
        self.urls, self.stats, self.next = urls, stats, start
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def post(self, kind: str, endpoint: str, *, record: bool = True, **kwargs: Any) -> httpx.Response | None:
        started = time.perf_counter()
        self.next += 1
        for attempt in range(6):
            url = self.urls[(self.next + attempt) % len(self.urls)]
            try:
                response = self.http.post(f"{url}/api/{endpoint}", **kwargs)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}"
            else:
                if response.status_code < 500:
                    if record:
                        with self.stats.lock:
                            if response.status_code == 200:
                                self.stats.latencies[kind].append((time.monotonic(), (time.perf_counter() - started) * 1000))
                            else:
                                self.stats.errors[kind] += 1
                                self.stats.error_samples.append(f"{kind} {response.status_code} {response.text[:200]}")
                    return response
                failure = f"HTTP {response.status_code}"
            with self.stats.lock:
                self.stats.retries[kind] += 1
            time.sleep(0.2 * (attempt + 1))
        with self.stats.lock:
            self.stats.errors[kind] += 1
            self.stats.error_samples.append(f"{kind}: {failure} on every attempt")
        return None


class Client(threading.Thread):
    def __init__(
        self, n: int, api: Api, documents: list[str], until: float, acknowledged: dict[str, str], *, writer: bool
    ) -> None:
        super().__init__(daemon=True)
        self.n, self.api, self.documents, self.until, self.acknowledged = n, api, documents, until, acknowledged
        self.mix = WRITER_MIX if writer else READER_MIX
        self.random = random.Random(n)

    def run(self) -> None:
        kinds, weights = zip(*self.mix, strict=True)
        while time.monotonic() < self.until:
            kind = self.random.choices(kinds, weights)[0]
            topic = self.random.choice(TOPICS)
            if kind == "search":
                self.api.post(kind, "rag.search", json={"query": f"how do we handle {topic}", "mode": "hybrid"})
            elif kind == "answer":
                self.api.post(kind, "rag.answer", json={"query": f"What is our process for {topic}?"})
            elif kind == "info":
                self.api.post(kind, "documents.info", json={"id": self.random.choice(self.documents)})
            else:
                document = self.random.choice(self.documents)
                mark = word(self.random)
                text = f"# Client {self.n} notes\n\nThe {topic} checklist changed: code {mark}.\n"
                response = self.api.post(kind, "documents.update", json={"id": document, "text": text})
                if response is not None and response.status_code == 200:
                    self.acknowledged[document] = mark


class Prober(threading.Thread):
    """Edits one document every few seconds and times until a keyword search finds the edit."""

    # An edit not found within this many seconds counts as missed; it is still looked for until LATE, to say when it came.
    DEADLINE, LATE = 60, 600

    def __init__(self, api: Api, document: str, running: threading.Event) -> None:
        super().__init__(daemon=True)
        self.api, self.document, self.running = api, document, running
        self.seconds: list[float] = []
        self.missed = 0
        # Edits slower than 5 s: when each was written (seconds from the clients' start) and how long it took (None:
        # not found within LATE), to set beside the kills.
        self.slow: list[tuple[float, float | None]] = []
        self.started = time.monotonic()
        self.random = random.Random(99)

    def run(self) -> None:
        while self.running.is_set():
            mark = word(self.random, 12)
            response = self.api.post(
                "probe-edit",
                "documents.update",
                record=False,
                json={"id": self.document, "text": f"# Probe\n\nThe probe word is {mark}.\n"},
            )
            if response is None or response.status_code != 200:
                continue
            written = time.perf_counter()
            found = False
            while time.perf_counter() - written < self.LATE:
                # The word alone: a keyword hit on the probe document means its new version is indexed.
                hits = self.api.post(
                    "probe-search", "rag.search", record=False, json={"query": mark, "mode": "keyword", "threshold": 0}
                )
                if (
                    hits is not None
                    and hits.status_code == 200
                    and any(h["document"]["id"] == self.document for h in hits.json()["data"])
                ):
                    found = True
                    break
                time.sleep(0.1)
            took = time.perf_counter() - written
            if found and took <= self.DEADLINE:
                self.seconds.append(took)
            else:
                self.missed += 1
            if not found or took > 5:
                self.slow.append((time.monotonic() - took - self.started, took if found else None))
            time.sleep(2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=int, default=90, help="how long the clients run")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--corpus", type=int, default=200, help="generated documents loaded before the run")
    parser.add_argument("--import-files", type=int, default=2000, help="files of the import run during the load")
    parser.add_argument("--vector-backend", choices=["pgvector", "milvus"], default="pgvector")
    parser.add_argument(
        "--embedding", choices=["local", "fake"], default="local", help="the local model, or the fake one (plumbing only)"
    )
    parser.add_argument("--web-workers", type=int, default=1, help="gunicorn workers per web server (4 threads each)")
    parser.add_argument("--no-kills", action="store_true", help="the same run without killing anything (a baseline)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python bench/cluster.py " + " ".join(sys.argv[1:] if argv is None else argv)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    redis_dir, primary_dir, standby_dir = WORK / "redis", WORK / "primary", WORK / "standby"

    from config.broker import EmbeddedRedis
    from config.embedded_db.server import ensure_server, stop_server
    from config.embedded_db.standby import Standby

    redis = EmbeddedRedis(redis_dir, persist=False)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "PYTHONPATH": str(ROOT),
        "SECRET_KEY": "cluster-bench-" + word(random.Random(), 24),
        "DATABASE_URL": "",
        "CAIRN_EMBEDDED_PGDATA": str(primary_dir),
        "CAIRN_EMBEDDED_DATABASE": "cairn",
        "CAIRN_EMBEDDED_SHARED_BUFFERS": "256MB",
        "CAIRN_RUN_DIR": str(WORK / "run"),
        "IMPORT_STORAGE_DIR": str(WORK / "imports"),
        "CELERY_BROKER_URL": redis.celery_url(0),
        "REDIS_URL": redis.cache_url(1),
        "RAG_EMBEDDING_PROVIDER": args.embedding,
        "RAG_VECTOR_BACKEND": args.vector_backend,
        "IMPORT_MAX_ARCHIVE_FILES": str(max(1000, args.import_files)),
        "CELERY_WORKER_CONCURRENCY": "1",
        "API_THROTTLE_USER": "1000000/min",
        "API_THROTTLE_RAG": "1000000/min",
        "API_THROTTLE_ANON": "1000000/min",
        "PROMETHEUS_MULTIPROC_DIR": str(WORK / "prometheus"),
    }
    if args.embedding == "fake":
        env |= {"RAG_EMBEDDING_MODEL": "fake-embedding", "RAG_EMBEDDING_DIMENSION": "384"}
    (WORK / "prometheus").mkdir()
    (WORK / "run").mkdir()
    processes: list[Process] = []
    milvus = start_milvus(args, env, processes)
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    # The clients' own requests would be logged one a line by the settings' logging.
    logging.getLogger("httpx").setLevel(logging.WARNING)

    supervisor = Supervisor(processes)
    standby = Standby(standby_dir)
    events: list[str] = []
    first_kill: list[float] = []
    try:
        redis_process = redis.start(log=WORK / "redis.log")
        address = ensure_server(str(primary_dir), shared_buffers="256MB", database="cairn")
        log(f"primary PostgreSQL on {address.host}")
        call_command("migrate", "--noinput", verbosity=0)
        from documents.models import Collection, Document
        from permissions.models import TokenScope, User
        from permissions.services import api_token_create

        call_command("setup_demo", stdout=io.StringIO())
        alice = User.objects.get(username="alice")
        token = api_token_create(user=alice, scope=TokenScope.WRITE, name="cluster bench").plaintext
        reader = api_token_create(user=User.objects.get(username="bob"), name="cluster bench").plaintext
        handbook = Collection.objects.get(team=alice.team, name="Handbook")
        standby.create(address).start()
        env["DATABASE_REPLICA_URLS"] = standby.url("cairn")
        log(f"standby streaming from the primary, socket in {standby_dir}")

        celery = [sys.executable, "-m", "celery", "-A", "config"]
        ports = [free_port(), free_port()]
        webs = [
            Process(
                f"web{i + 1}",
                [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--config=python:config.gunicorn",
                 f"--bind=127.0.0.1:{port}", f"--workers={args.web_workers}", "--threads=4", "--timeout=60",
                 "--graceful-timeout=10", "--no-control-socket"],
                env,
                ready_url=f"http://127.0.0.1:{port}/health",
            )
            for i, port in enumerate(ports)
        ]  # fmt: skip
        interactive = Process(
            "worker-interactive",
            [
                *celery,
                "worker",
                "-Q",
                settings.CELERY_QUEUE_INTERACTIVE,
                "--concurrency=1",
                "-n",
                "interactive@%h",
                "--without-gossip",
                "--loglevel=warning",
            ],
            env,
        )
        bulk = Process(
            "worker-bulk",
            [
                *celery,
                "worker",
                "-Q",
                settings.CELERY_QUEUE_BULK,
                "--concurrency=1",
                "-n",
                "bulk@%h",
                "--without-gossip",
                "--loglevel=warning",
            ],
            env,
        )
        beat = Process("beat", [*celery, "beat", "--loglevel=warning", f"--schedule={WORK / 'celerybeat-schedule'}"], env)
        for p in [interactive, bulk, beat, *webs]:
            processes.append(p.start())
        supervisor.start()
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        log(f"web servers on {', '.join(urls)}; workers -Q interactive, -Q bulk; beat; redis; {args.vector_backend}")

        stats = Stats()
        setup_api = Api(urls, token, stats)
        rng = random.Random(7)
        job = import_files(setup_api, handbook.pk, [markdown(rng, n) for n in range(args.corpus)], "corpus.zip")
        wait_import(setup_api, job, timeout=1800)
        wait_indexed(timeout=1800)
        documents_total = Document.objects.filter(deleted_at__isnull=True).count()
        log(f"corpus loaded and indexed: {documents_total} documents")

        own: list[list[str]] = []
        for n in range(args.clients):
            ids = []
            for k in range(3):
                response = setup_api.post(
                    "setup",
                    "documents.create",
                    record=False,
                    json={
                        "title": f"Client {n} doc {k}",
                        "text": f"# Client {n}\n\nNothing yet.\n",
                        "collectionId": str(handbook.pk),
                        "publish": True,
                    },
                )
                assert response is not None and response.status_code == 200, response
                ids.append(response.json()["data"]["id"])
            own.append(ids)
        probe = setup_api.post(
            "setup",
            "documents.create",
            record=False,
            json={"title": "Probe", "text": "# Probe\n\nNothing yet.\n", "collectionId": str(handbook.pk), "publish": True},
        )
        assert probe is not None and probe.status_code == 200
        probe_id = probe.json()["data"]["id"]
        wait_indexed(timeout=300)

        acknowledged: dict[str, str] = {}
        importing = threading.Event()
        importing.set()
        import_started = time.monotonic()
        big_job = import_files(
            Api(urls, token, stats), handbook.pk, [markdown(rng, 100_000 + n) for n in range(args.import_files)], "import.zip"
        )
        log(f"import of {args.import_files} files started (job {big_job})")
        prober = Prober(Api(urls, token, stats, start=1), probe_id, importing)
        started = time.monotonic()
        prober.started = started
        prober.start()
        until = started + args.seconds
        clients = [
            Client(
                n,
                Api(
                    urls, api_token_create(user=alice, scope=TokenScope.WRITE).plaintext if n % 2 == 0 else reader, stats, start=n
                ),
                own[n] if n % 2 == 0 else [d for ids in own for d in ids],
                until,
                acknowledged,
                writer=n % 2 == 0,
            )
            for n in range(args.clients)
        ]
        for c in clients:
            c.start()
        import_done_at: list[float] = []
        watcher = threading.Thread(
            target=watch_import, args=(Api(urls, token, stats), big_job, importing, import_done_at), daemon=True
        )
        watcher.start()

        def at(fraction: float) -> None:
            time.sleep(max(0.0, started + fraction * args.seconds - time.monotonic()))

        if not args.no_kills:
            at(0.2)
            first_kill.append(time.monotonic())
            webs[0].signal(signal.SIGKILL)
            events.append(
                f"{time.monotonic() - started:5.1f} s  SIGKILL web1 (gunicorn and its workers); the supervisor restarts it"
            )
            log(events[-1])
            at(0.35)
            bulk.signal(signal.SIGKILL)
            events.append(f"{time.monotonic() - started:5.1f} s  SIGKILL the bulk worker, mid-import; the supervisor restarts it")
            log(events[-1])
            at(0.5)
            replica_xacts = replica_transactions(standby)
            standby.kill()
            events.append(
                f"{time.monotonic() - started:5.1f} s  SIGKILL the standby's postmaster (it had committed {replica_xacts} read transactions)"
            )
            log(events[-1])
            at(0.6)
            interactive.signal(signal.SIGKILL)
            events.append(
                f"{time.monotonic() - started:5.1f} s  SIGKILL the interactive worker (edits it had taken are lost with it); "
                "the supervisor restarts it"
            )
            log(events[-1])
            at(0.7)
            standby.start()
            events.append(f"{time.monotonic() - started:5.1f} s  standby started again (crash recovery, then streaming)")
            log(events[-1])
        for c in clients:
            c.join()
        elapsed = time.monotonic() - started
        log("load finished; waiting for the import and the indexing to settle")
        watcher.join(timeout=3600)
        prober.join(timeout=Prober.LATE + 60)
        wait_indexed(timeout=1800)
        lost = lost_writes(acknowledged)
        imported = Document.objects.filter(deleted_at__isnull=True).count() - documents_total - args.clients * 3 - 1
        report(
            args=args,
            command=command,
            stats=stats,
            elapsed=elapsed,
            first_kill=first_kill[0] if first_kill else None,
            prober=prober,
            import_seconds=(import_done_at[0] - import_started) if import_done_at else None,
            imported=imported,
            acknowledged=len(acknowledged),
            lost=lost,
            events=events,
            restarts={p.name: p.restarts for p in processes},
            replica_after=replica_transactions(standby),
            milvus=milvus,
        )
        return 0 if not lost and not sum(stats.errors.values()) else 1
    finally:
        supervisor.stopping.set()
        for p in reversed(processes):
            p.stop()
        standby.stop(mode="immediate")
        from django.db import connections

        connections.close_all()
        stop_server(str(primary_dir))
        try:
            os.killpg(redis_process.pid, signal.SIGTERM)
        except (ProcessLookupError, UnboundLocalError):
            pass


def start_milvus(args: argparse.Namespace, env: dict[str, str], processes: list[Process]) -> str:
    """Milvus Lite as a node of its own (the milvus backend's config.milvus_lite), its address handed to every process."""
    if args.vector_backend != "milvus":
        return ""
    try:
        from config.milvus_lite import EmbeddedMilvus  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise SystemExit(
            "this checkout has no Milvus vector backend (config.milvus_lite); run with --vector-backend pgvector"
        ) from None
    milvus = EmbeddedMilvus(str(WORK / "milvus"), port=free_port())
    process = Process("milvus", milvus.argv(), env)
    processes.append(process.start())
    assert process.process is not None
    milvus.wait_ready(process.process)
    env["RAG_MILVUS_URI"] = milvus.uri
    return str(milvus.uri)


def import_files(api: Api, collection_id: Any, texts: list[str], name: str) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, text in enumerate(texts):
            archive.writestr(f"notes/{n:05d}.md", text)
    response = api.post(
        "import",
        "documents.import",
        record=False,
        data={"collectionId": str(collection_id), "publish": "true"},
        files=[("files", (name, buffer.getvalue(), "application/zip"))],
    )
    assert response is not None and response.status_code == 200, response and response.text
    return str(response.json()["data"]["id"])


def wait_import(api: Api, job: str, *, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = api.post("jobs", "jobs.info", record=False, json={"id": job})
        if response is not None and response.status_code == 200 and response.json()["data"]["stage"] in {"done", "failed"}:
            return response.json()["data"]
        time.sleep(1)
    raise RuntimeError(f"import {job} did not finish")


def watch_import(api: Api, job: str, importing: threading.Event, done_at: list[float]) -> None:
    try:
        data = wait_import(api, job, timeout=3600)
        done_at.append(time.monotonic())
        log(f"import {job}: {data['stage']}, {data['filesDone']} files done, {data['filesFailed']} failed")
    finally:
        importing.clear()


def wait_indexed(*, timeout: float) -> None:
    from django.db.models import F, Q

    from documents.models import Document
    from rag.models import IndexState, IndexStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = Document.objects.filter(deleted_at__isnull=True, published_at__isnull=False)
        done = IndexStatus.objects.filter(
            document__in=live, state=IndexState.INDEXED, indexed_version=F("document__version")
        ).count()
        failed = IndexStatus.objects.filter(Q(document__in=live), state=IndexState.FAILED).count()
        if done + failed >= live.count():
            return
        time.sleep(1)
    raise RuntimeError("indexing did not settle")


def lost_writes(acknowledged: dict[str, str]) -> list[str]:
    """Acknowledged edits whose text is not the document's, or is not in its indexed chunks."""
    from django.db.models import F

    from documents.models import Document
    from rag.models import Chunk, IndexStatus

    lost = []
    for document_id, mark in acknowledged.items():
        document = Document.objects.get(pk=document_id)
        if mark not in document.text:
            lost.append(f"{document_id}: text lacks {mark}")
        elif not Chunk.objects.filter(
            document_id=document_id, document_version=document.version, chunk_text__contains=mark
        ).exists():
            lost.append(f"{document_id}: {mark} not indexed")
        elif not IndexStatus.objects.filter(document_id=document_id, indexed_version=F("document__version")).exists():
            lost.append(f"{document_id}: index status behind")
    return lost


def replica_transactions(standby: Any) -> int | str:
    import psycopg

    try:
        address = standby.address
        with psycopg.connect(host=address.host, port=address.port, user=address.user, dbname="cairn", connect_timeout=3) as conn:
            row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = 'cairn'").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error as exc:
        return f"unreachable ({type(exc).__name__})"


def report(
    *,
    args: argparse.Namespace,
    command: str,
    stats: Stats,
    elapsed: float,
    first_kill: float | None,
    prober: Prober,
    **figures: Any,
) -> None:
    total = sum(len(v) for v in stats.latencies.values()) + sum(stats.errors.values())
    print()
    print(
        f"Cairn multi-node run: {args.clients} clients for {args.seconds} s over 2 web servers; {args.vector_backend}, {args.embedding} embeddings"
    )
    # The same run's baseline: the requests answered before the first kill, against those answered after it.
    print(
        f"{'kind':<8} {'requests':>8} {'errors':>6} {'retried':>7} {'p50 ms':>8} {'p95 ms':>8}   p50 / p95 ms (n) before the first kill; after it"
    )
    for kind in KINDS:
        timed = stats.latencies.get(kind, [])
        values = [ms for _, ms in timed]
        before = [ms for at, ms in timed if first_kill is None or at < first_kill]
        after = [ms for at, ms in timed if first_kill is not None and at >= first_kill]
        print(
            f"{kind:<8} {len(values) + stats.errors.get(kind, 0):>8} {stats.errors.get(kind, 0):>6} {stats.retries.get(kind, 0):>7} "
            f"{percentile(values, 0.5):>8.0f} {percentile(values, 0.95):>8.0f}   "
            f"{percentile(before, 0.5):.0f} / {percentile(before, 0.95):.0f} ({len(before)}); "
            f"{percentile(after, 0.5):.0f} / {percentile(after, 0.95):.0f} ({len(after)})"
        )
    print(
        f"throughput: {total / elapsed:.1f} requests/s ({total} in {elapsed:.0f} s); errors seen by clients: {sum(stats.errors.values())}"
    )
    for sample in stats.error_samples[:5]:
        print(f"  error: {sample}")
    seconds = prober.seconds
    if seconds:
        print(
            f"edit -> searchable during the {args.import_files}-file import: {len(seconds)} edits, p50 {statistics.median(seconds):.2f} s, "
            f"p95 {percentile(seconds, 0.95):.2f} s, max {max(seconds):.2f} s, within 5 s: {sum(s <= 5 for s in seconds)}/{len(seconds)}, never found: {prober.missed}"
        )
    else:
        print(f"edit -> searchable: no probe completed (missed {prober.missed})")
    for written, took in prober.slow:
        found = f"searchable after {took:.1f} s" if took is not None else f"not found within {prober.LATE} s"
        print(f"  slow edit: written {written:.1f} s into the run, {found}")
    import_seconds = figures["import_seconds"]
    print(
        f"import: {figures['imported']} of {args.import_files} files became documents"
        + (f", done {import_seconds:.0f} s after it was sent" if import_seconds else "")
    )
    print(f"acknowledged edits: {figures['acknowledged']} documents; lost writes: {len(figures['lost'])}")
    for line in figures["lost"][:5]:
        print(f"  lost: {line}")
    print("kills:" if figures["events"] else "kills: none (--no-kills)")
    for event in figures["events"]:
        print(f"  {event}")
    print(f"restarts by the supervisor: {figures['restarts']}")
    print(f"standby after the run: {figures['replica_after']} read transactions since its restart")
    if figures["milvus"]:
        print(f"Milvus Lite: {figures['milvus']}")
    print(f"command: {command}")


if __name__ == "__main__":
    sys.exit(main())
