"""rag.search latency over HTTP at 10k to 1M chunks, and vector recall@10 against exact search.

The corpus is SciFact's abstracts, chunked and embedded with the local MiniLM model by
bench/scifact.py (run that first: it leaves them in the `cairn_bench` database, `--source-database`). To reach
100k chunks without hours of embedding, the corpus is copied: copy 0 keeps the real vectors,
later copies add small Gaussian noise to each vector (cosine to the original about 0.95), so
the index sees clustered, realistic data rather than uniform random points. Documents are
spread over ten collections with no team access; the measured user belongs to one of them,
so they see about 10% of the chunks. The knowledge graph's facts are read from every chunk by
the rules extractor, as indexing writes them. Queries are SciFact's claims, a disjoint set per
mode (hybrid with the graph, the default; hybrid without it; vector; keyword; graph alone), so
no mode profits from another's query-embedding cache.

Each mode is timed on two servers: the default, and one with sign bits off (RAG_SIGN_BITS_MAX_SHARE=0: the
reader's scope walked through HNSW or scanned instead). Each size is built once into its own embedded database (`cairn_bench_latency_<n>`) and reused.
The server is what `make run` runs (`python -m config.serve`: gunicorn's gthread workers sharing a Redis cache, a
Celery worker and beat; DEBUG off), on 127.0.0.1, started afresh (its cache empty) for each of the two servers.

Recall: the reader's vector ranking by sign bits (rerank of the Hamming-nearest) and through the HNSW index
(iterative scans), each against an exact scan of the same scope, and which of them search chooses for the reader.
Also reported: the time to build the corpus (when it is built by the run), disk per table and for the
HNSW index, PostgreSQL's memory settings and the proportional set size of its processes after the run.
The corpus's token and database are left in var/bench-latency-<n>.json (and var/bench-latency.json from 100k up)
for bench/cold_start.py and bench/answer_ttfb.py.

Data: the chunks and vectors bench/scifact.py indexed (embedded database `--source-database`, default
cairn_bench), and SciFact's claims as queries, by default from ../shared/datasets/scifact beside the repository
(`--dataset`, or the SCIFACT_DIR environment variable).
Takes: on 2 vCPUs, building 100k chunks 7 to 15 minutes (2 GB of disk) and measuring them a few minutes; building
1M chunks 35 to 55 minutes without the graph's facts and 17 to 26 more with them (21 to 22 GB of disk), measuring
them about 10.

Reproduce:  .venv/bin/python bench/latency.py --chunks 10000 100000
            .venv/bin/python bench/latency.py --chunks 300000             (10% visible, as every size)
            .venv/bin/python bench/latency.py --chunks 100000 --storage-only
            .venv/bin/python bench/latency.py --chunks 1000000 --no-graph   (no graph facts: hybrid without the graph, vector, keyword)
            .venv/bin/python bench/latency.py --chunks 1000000 --no-graph --walk-rows 50 100 200 300   (also HNSW recall per walk length)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from answer_cache import stop_serve  # bench/: stops config.serve as Ctrl-C would

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The shared datasets sit beside the repository; SCIFACT_DIR points elsewhere.
DATASET = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "datasets" / "scifact"))
SOURCE_DATABASE = "cairn_bench"  # where bench/scifact.py leaves SciFact's chunks
MODEL = "all-MiniLM-L6-v2"
COLLECTIONS = 10
NOISE = 0.012  # per-dimension sigma on unit vectors of 384 dims: cosine to the original ~0.95
# What each timed run sends (a disjoint slice of the queries each): hybrid is the default, with the graph.
HTTP_MODES: dict[str, dict[str, object]] = {
    "hybrid": {"mode": "hybrid"},
    "hybrid-no-graph": {"mode": "hybrid", "weights": [2, 1, 0]},
    "vector": {"mode": "vector"},
    "keyword": {"mode": "keyword"},
    "graph": {"mode": "graph"},
}


def database_name(chunks: int) -> str:
    return f"cairn_bench_latency_{chunks}"


def setup_django(database: str) -> None:
    os.environ["CAIRN_EMBEDDED_DATABASE"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ.setdefault("RAG_EMBEDDING_PROVIDER", "local")
    import django

    django.setup()


def source_chunks(source_database: str) -> list[dict]:
    """SciFact's indexed chunks (text, offsets, metadata, vector) from bench/scifact.py's database."""
    import psycopg
    from django.db import connection

    connection.ensure_connection()  # the embedded backend learns the server's address on connecting
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=source_database) as conn:
        rows = conn.execute(
            "SELECT d.title, d.text, e.chunk_index, e.chunk_text, e.start_offset, e.end_offset, e.metadata, e.embedding::text "
            "FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id "
            "JOIN permissions_team t ON t.id = d.team_id "
            "WHERE e.model_id = %s AND t.name = 'SciFact' ORDER BY d.created_at, d.title, e.chunk_index",
            [MODEL],
        ).fetchall()
    if not rows:
        sys.exit(f"No SciFact chunks in database {source_database}: run bench/scifact.py --database {source_database} first.")
    docs: dict[str, dict] = {}
    for title, text, index, chunk_text, start, end, metadata, vector in rows:
        # bench/scifact.py titles a document by its corpus id and opens its text with the paper's title
        # as a heading; here the paper's title is the document's, as a knowledge base's would be, so
        # the graph has titles to find and documents to be the subject of.
        heading = text.split("\n", 1)[0].lstrip("#").strip()
        doc = docs.setdefault(title, {"title": heading or title, "text": text, "chunks": []})
        doc["chunks"].append((index, chunk_text, start, end, metadata, np.asarray(json.loads(vector), dtype=np.float32)))
    return list(docs.values())


def build(chunks: int, *, graph: bool = True, source_database: str = SOURCE_DATABASE) -> dict:
    """Create (or reuse) the corpus of exactly `chunks` chunks; returns the reader's token and counts."""
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Sum
    from django.utils import timezone

    from documents.models import Collection, CollectionMembership, Document
    from permissions.models import Access, Role, Team, TokenScope, User
    from permissions.services import api_token_create
    from rag.corpus.vector_index import ensure_vector_index
    from rag.indexing.keyword_postings import keyword_columns, write_postings
    from rag.indexing.pipeline import content_hash
    from rag.models import Chunk, IndexState, IndexStatus, Mention

    call_command("migrate", verbosity=0)
    team = Team.objects.filter(name="Bench").first()
    built = team and Chunk.objects.filter(team=team, model_id=MODEL).count()
    counted = team and IndexStatus.objects.filter(document__team=team).aggregate(n=Sum("chunk_count"))["n"]
    if team is None or not built == counted == chunks:
        if team:
            # A build cut short left some of it: the database is the bench's own, so start it afresh.
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE permissions_team CASCADE")
        team = Team.objects.create(name="Bench")
        reader = User.objects.create(username=f"reader-{team.pk.hex[:6]}", team=team)
        collections = [Collection.objects.create(team=team, name=f"C{i}", default_access=Access.NONE) for i in range(COLLECTIONS)]
        CollectionMembership.objects.create(collection=collections[0], user=reader, role=Role.READ)
        rng = np.random.default_rng(7)
        source = source_chunks(source_database)
        # Each abstract's keyword columns, as indexing computes them before writing its chunks: once, for every copy.
        keywords = [
            keyword_columns(chunks=[(src["title"], c[1], c[4].get("heading_path", [])) for c in src["chunks"]]) for src in source
        ]
        now = timezone.now()
        made, copy, started = 0, 0, time.perf_counter()
        with connection.cursor() as cursor:
            while made < chunks:
                batch_docs, rows, statuses = [], [], []
                for i, src in enumerate(source):
                    if made >= chunks:
                        break
                    doc = Document(
                        team=team,
                        collection=collections[(copy * len(source) + i) % COLLECTIONS],
                        title=src["title"],
                        text=src["text"],
                        created_by=reader,
                        published_at=now,
                        created_at=now,
                        updated_at=now,
                    )
                    batch_docs.append(doc)
                    doc_chunks = src["chunks"][: chunks - made]
                    statuses.append(
                        IndexStatus(
                            document=doc,
                            model_id=MODEL,
                            state=IndexState.INDEXED,
                            indexed_version=1,
                            indexed_text_hash=content_hash(src["text"]),
                            chunk_count=len(doc_chunks),
                            updated_at=now,
                        )
                    )
                    for (index, text, start, end, metadata, vector), (search_vector, doc_length) in zip(
                        doc_chunks, keywords[i], strict=False
                    ):
                        if copy:
                            vector = vector + rng.normal(0, NOISE, vector.shape).astype(np.float32)
                            vector /= np.linalg.norm(vector)
                        rows.append(
                            (
                                doc.pk,
                                team.pk,
                                index,
                                text,
                                1,
                                f"bench-{copy}-{doc.pk}-{index}",
                                MODEL,
                                "[" + ",".join(f"{x:.6g}" for x in vector) + "]",
                                start,
                                end,
                                json.dumps(metadata),
                                search_vector,
                                doc_length,
                                now,
                            )
                        )
                        made += 1
                Document.objects.bulk_create(batch_docs, batch_size=2000)
                IndexStatus.objects.bulk_create(statuses, batch_size=2000)
                with cursor.cursor.copy(
                    "COPY document_embeddings (document_id, team_id, chunk_index, chunk_text, document_version, content_hash, "
                    "model_id, embedding, start_offset, end_offset, metadata, search_vector, doc_length, created_at) FROM STDIN"
                ) as copy_in:
                    for row in rows:
                        copy_in.write_row(row)
                ids = [d.pk for d in batch_docs]
                for i in range(0, len(ids), 2000):
                    write_postings(document_ids=ids[i : i + 2000], model_id=MODEL)
                copy += 1
                print(f"  built {made}/{chunks} chunks ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
            cursor.execute("SET maintenance_work_mem = '1GB'")
            started = time.perf_counter()
            ensure_vector_index(MODEL, 384)
            print(f"  HNSW index built in {time.perf_counter() - started:.0f}s", file=sys.stderr)
            # VACUUM sets the visibility map, so keyword postings are read index-only from the start
            # (autovacuum does the same for a live server after its first inserts).
            cursor.execute("VACUUM ANALYZE")
    if graph and not Mention.objects.filter(chunk__team=team).exists():
        build_graph_facts(team)
    # The reader made above with the team (by name: a user added to the bench database by hand is not measured).
    reader = User.objects.get(team=team, username=f"reader-{team.pk.hex[:6]}")
    token = api_token_create(user=reader, scope=TokenScope.READ, name="latency bench").plaintext
    visible = Chunk.objects.filter(document__in=Document.objects.visible_to(reader), model_id=MODEL).count()
    return {
        "database": connection.settings_dict["NAME"],
        "token": token,
        "chunks": chunks,
        "visible": visible,
        "user": reader.username,
    }


def storage() -> dict:
    """What the corpus takes on disk (heap and indexes per table, the HNSW index alone, the database) and
    in memory (PostgreSQL's settings, and the proportional set size of its processes now)."""
    from django.db import connection

    tables = [
        "document_embeddings",
        "keyword_postings",
        "chunk_sign_bits",
        "graph_entities",
        "graph_mentions",
        "graph_relations",
        "documents_document",
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid) "
            "FROM pg_class c WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
            [tables],
        )
        sizes = {name: {"heap": heap, "indexes": indexes, "total": total} for name, heap, indexes, total in cursor.fetchall()}
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw'"
        )
        hnsw = dict(cursor.fetchall())
        cursor.execute("SELECT pg_database_size(current_database())")
        (database,) = cursor.fetchone()
        cursor.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'maintenance_work_mem')"
        )
        settings = {name: f"{value}{unit or ''}" for name, value, unit in cursor.fetchall()}
    pss = 0
    for status in Path("/proc").glob("[0-9]*/comm"):
        try:
            if status.read_text().strip() != "postgres":
                continue
            rollup = (status.parent / "smaps_rollup").read_text()
        except OSError:
            continue
        pss += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0) * 1024
    return {"tables": sizes, "hnsw": hnsw, "database": database, "settings": settings, "postgres_pss": pss}


def print_storage(report: dict) -> None:
    mib = 1024 * 1024
    print(
        f"  database {report['database'] / mib:.0f} MiB on disk; PostgreSQL {report['settings']}, "
        f"its processes' PSS now {report['postgres_pss'] / mib:.0f} MiB"
    )
    for name, size in sorted(report["tables"].items(), key=lambda item: -item[1]["total"]):
        print(
            f"    {name:22s} heap {size['heap'] / mib:8.1f} MiB  indexes {size['indexes'] / mib:8.1f} MiB  "
            f"total {size['total'] / mib:8.1f} MiB"
        )
    for name, size in report["hnsw"].items():
        print(f"    HNSW {name}: {size / mib:.1f} MiB")


def build_graph_facts(team) -> None:
    """The knowledge graph's facts for every chunk, read by the rules extractor as indexing would."""
    from django.db import connection, transaction

    from documents.models import Document
    from rag.indexing.graph_extraction import title_matcher, write_document_facts
    from rag.models import Chunk

    matcher = title_matcher(team.pk)
    documents = list(Document.objects.filter(team=team).order_by("pk"))
    started = time.perf_counter()
    for i in range(0, len(documents), 500):
        batch = documents[i : i + 500]
        chunks: dict = {}
        for chunk in Chunk.objects.filter(document__in=batch, model_id=MODEL).order_by("chunk_index"):
            chunks.setdefault(chunk.document_id, []).append(chunk)
        with transaction.atomic():
            for document in batch:
                write_document_facts(document=document, chunks=chunks.get(document.pk, []), matcher=matcher)
        print(
            f"  graph facts for {i + len(batch)}/{len(documents)} documents ({time.perf_counter() - started:.0f}s)",
            file=sys.stderr,
        )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE graph_entities, graph_mentions, graph_relations")


def quiet_http_logs() -> None:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RUN_DIR = ROOT / "var" / "bench-latency-run"


def start_server(database: str, port: int, extra_env: dict[str, str] | None = None, run_dir: Path = RUN_DIR) -> subprocess.Popen:
    """`python -m config.serve` (what `make run` runs: gunicorn's gthread workers, a Celery worker and beat, and the
    Redis it starts for the broker and the cache every web process shares) on the bench's database, in its own run
    directory, emptied first (each server starts with a cold cache); returns once `/health` answers."""
    from django.conf import settings

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    env = {
        **os.environ,
        # The key this process made the corpus's tokens with: the server's own run directory holds none.
        "SECRET_KEY": settings.SECRET_KEY,
        "CAIRN_EMBEDDED_DATABASE": database,
        "CAIRN_RUN_DIR": str(run_dir),
        "CELERY_BROKER_URL": "",
        "REDIS_URL": "",
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "false",
        "RAG_EMBEDDING_PROVIDER": "local",
        "API_THROTTLE_USER": "1000000/min",
        "API_THROTTLE_RAG": "1000000/min",
        "LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    log_path = run_dir / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "config.serve", "--no-migrate", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"config.serve exited with {process.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.3)
    stop_serve(process)
    raise SystemExit(f"config.serve did not start:\n{log_path.read_text(errors='replace')[-3000:]}")


def wait_for_reconciliation(process: subprocess.Popen, run_dir: Path = RUN_DIR) -> None:
    """Until the worker's start-up reconciliation of the whole index (rag.receivers) has ended, and the documents
    it queued for indexing (if any) are indexed: measure searches after them, not beside them."""
    started = time.monotonic()
    log_path = run_dir / "serve.log"

    def settled(log: str) -> bool:
        if not re.search(r"reconcile_index_task\[[^\]]+\] (succeeded|raised)", log):
            return False
        queued = set(re.findall(r"index_batch_task\[([^\]]+)\] received", log))
        return queued <= set(re.findall(r"index_batch_task\[([^\]]+)\] (?:succeeded|raised)", log))

    while not settled(log_path.read_text(errors="replace")):
        if time.monotonic() - started > 900:
            stop_serve(process)
            raise SystemExit("the worker's start-up reconciliation and the indexing it queued did not end within 15 minutes")
        time.sleep(0.5)
    print(f"  server up; the worker's start-up reconciliation ended {time.monotonic() - started:.1f} s after it answered")


def load_queries(dataset: Path = DATASET) -> list[str]:
    return [json.loads(line)["text"] for line in (dataset / "queries.jsonl").open()]


def measure_http(port: int, token: str, queries: list[str], per_mode: int) -> dict:
    import httpx

    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    # Warm every web process (model loaded, connections open): a connection closed after each request lands on any
    # of them. The measured requests then share one kept-alive connection, as one client's would.
    for query in queries[-20:]:
        client.post("/api/rag.search", json={"query": query, "mode": "hybrid"}, headers={"Connection": "close"})
    results = {}
    for m, (label, body) in enumerate(HTTP_MODES.items()):
        latencies, short = [], 0
        for query in queries[m * per_mode : (m + 1) * per_mode]:
            started = time.perf_counter()
            response = client.post("/api/rag.search", json={"query": query, **body, "limit": 10, "threshold": 0})
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{label}: HTTP {response.status_code} {response.text[:300]}")
            # The graph alone ranks only chunks its entities reach: a short page there is an answer, not a fault.
            short += len(response.json()["data"]) < 10 and body["mode"] != "graph"
        latencies.sort()
        results[label] = {
            "p50": statistics.median(latencies),
            "p95": latencies[int(0.95 * (len(latencies) - 1))],
            "short_pages": short,
            "n": len(latencies),
        }
    return results


def measure_recall(user, queries: list[str], n: int, walk_rows: tuple[int, ...] = ()) -> tuple[str, dict[str, dict]]:
    """Vector search by sign bits and through the HNSW index (iterative scans) against an exact scan, for `user`:
    the path search chooses for them, and per path (the walk also per value of RAG_HNSW_WALK_ROWS in `walk_rows`)
    recall@10 and in-process latency against the same exact ten."""
    from django.test import override_settings

    from rag.retrieval.query import embed_query
    from rag.retrieval.stats import model_chunk_count, scope_index_stats
    from rag.retrieval.vector import Path as VectorPath
    from rag.retrieval.vector import choose_path, vector_ranking
    from rag.retrieval.visibility import search_scope

    scope = search_scope(user=user)
    provider_vectors = [embed_query(q) for q in queries[:n]]
    scope_chunks, model_chunks = scope_index_stats(scope, model_id=MODEL).chunks, model_chunk_count(MODEL)
    # Each path named; the walk bounded as search bounds it, from the scope's share of the index.
    rank = functools.partial(
        vector_ranking,
        scope=scope,
        model_id=MODEL,
        dimension=384,
        limit=10,
        threshold=-1,
        scope_chunks=scope_chunks,
        model_chunks=model_chunks,
    )
    exact_ms, exacts = [], []
    for vector in provider_vectors:
        started = time.perf_counter()
        exacts.append(rank(vector=vector, path="exact"))
        exact_ms.append((time.perf_counter() - started) * 1000)
    variants: list[tuple[str, VectorPath, int]] = [
        ("sign bits", "signs", 0),
        ("HNSW", "hnsw", 0),
        *((f"HNSW, walk rows {r}", "hnsw", r) for r in walk_rows),
    ]
    results = {}
    for label, path, rows in variants:
        recalls, near_recalls, short, path_ms = [], [], 0, []
        with override_settings(RAG_HNSW_WALK_ROWS=rows):
            for vector, exact in zip(provider_vectors, exacts, strict=True):
                started = time.perf_counter()
                hits = rank(vector=vector, path=path)
                path_ms.append((time.perf_counter() - started) * 1000)
                short += len(hits) < 10
                # Ties between copies are possible; a hit counts if it scores at least the exact 10th best.
                kth = exact[-1].score if exact else 0.0
                recalls.append(sum(h.score >= kth - 1e-6 for h in hits) / max(len(exact), 1))
                # ann-benchmarks' definition (ann_benchmarks/plotting/metrics.py, knn_threshold): a hit counts when its
                # distance is within 1e-3 of the exact 10th's. The corpus's noisy copies of one abstract lie that close.
                near_recalls.append(sum(h.score >= kth - 1e-3 for h in hits) / max(len(exact), 1))
        results[label] = {
            "recall@10": statistics.mean(recalls),
            "near_recall@10": statistics.mean(near_recalls),
            "min_recall@10": min(recalls),
            "short_pages": short,
            "n": len(recalls),
            "exact_p50_ms": statistics.median(exact_ms),
            "p50_ms": statistics.median(path_ms),
            "p95_ms": sorted(path_ms)[int(0.95 * (len(path_ms) - 1))],
        }
    return choose_path(limit=10, scope_chunks=scope_chunks, model_chunks=model_chunks), results


def measure_split(user, queries: list[str], weights: tuple[float, ...] | None = None) -> dict:
    """Median in-process latency split of hybrid searches (the same stages rag.search logs)."""
    from rag.retrieval.search import search

    splits: dict[str, list[float]] = {}
    for query in queries:
        result = search(user=user, query=query, limit=10, threshold=0.0, mode="hybrid", weights=weights)
        for stage, ms in result.latency.items():
            splits.setdefault(stage, []).append(ms)
    return {stage: round(statistics.median(values), 1) for stage, values in splits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder, for its claims (default: %(default)s)"
    )
    parser.add_argument(
        "--source-database",
        default=SOURCE_DATABASE,
        help="embedded database bench/scifact.py indexed SciFact into (default: %(default)s)",
    )
    parser.add_argument("--queries", type=int, default=150, help="queries per mode over HTTP (five modes)")
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--storage-only", action="store_true", help="build or reuse the corpus, report disk and memory only")
    parser.add_argument(
        "--no-graph", action="store_true", help="skip the graph facts (an hour at 1M chunks) and the modes that read them"
    )
    parser.add_argument(
        "--walk-rows",
        type=int,
        nargs="+",
        default=[],
        help="also count HNSW recall with RAG_HNSW_WALK_ROWS at each of these values (a longer walk against its cost)",
    )
    args = parser.parse_args()
    if len(args.chunks) > 1:
        # One database per process: Django connects once. Run each size in a child process.
        for chunks in args.chunks:
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--chunks",
                    str(chunks),
                    "--queries",
                    str(args.queries),
                    "--recall-queries",
                    str(args.recall_queries),
                    "--dataset",
                    str(args.dataset),
                    "--source-database",
                    args.source_database,
                    *(["--storage-only"] if args.storage_only else []),
                    *(["--no-graph"] if args.no_graph else []),
                    *(["--walk-rows", *map(str, args.walk_rows)] if args.walk_rows else []),
                ],
                check=True,
            )
        return
    chunks = args.chunks[0]
    setup_django(database_name(chunks))
    quiet_http_logs()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    started = time.perf_counter()
    corpus = build(chunks, graph=not args.no_graph, source_database=args.source_database)
    print(f"corpus ready in {time.perf_counter() - started:.0f}s (built now, or reused)")
    if args.storage_only:
        print_storage(storage())
        return
    from permissions.models import User

    user = User.objects.get(username=corpus["user"])
    queries = load_queries(args.dataset)
    (ROOT / "var").mkdir(exist_ok=True)
    (ROOT / "var" / f"bench-latency-{chunks}.json").write_text(json.dumps(corpus))
    if chunks >= 100_000:
        (ROOT / "var" / "bench-latency.json").write_text(json.dumps(corpus))
    default_path, recalls = measure_recall(user, queries[::-1], args.recall_queries, walk_rows=tuple(args.walk_rows))
    split = measure_split(user, queries[300:350], weights=(2, 1, 0) if args.no_graph else None)
    if args.no_graph:
        for label in ("hybrid", "graph"):
            HTTP_MODES.pop(label)
    runs = {}
    # The default (a reader who sees a narrow share is ranked by sign bits), and the same with sign bits off
    # (the reader's scope walked through HNSW or scanned, whichever reads less; rag.retrieval.vector.choose_path).
    for label, extra in (("default", {}), ("sign bits off", {"RAG_SIGN_BITS_MAX_SHARE": "0"})):
        port = free_port()
        # Without the graph's facts, the worker would read them for every document (an hour at 1M) while searches
        # are timed: the modes measured then do not read the graph.
        extra = {**extra, "RAG_GRAPH_ENABLED": "false"} if args.no_graph else extra
        server = start_server(corpus["database"], port, extra)
        try:
            wait_for_reconciliation(server)
            runs[label] = measure_http(port, corpus["token"], queries, args.queries)
        finally:
            stop_serve(server)
    print(f"{chunks} chunks, user {corpus['user']} sees {corpus['visible']} ({corpus['visible'] / chunks:.0%})")
    for label, http in runs.items():
        for mode, r in http.items():
            print(
                f"  [{label}] {mode:15s} HTTP p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms  short pages {r['short_pages']}/{r['n']}"
            )
    exact_ms = next(iter(recalls.values()))["exact_p50_ms"]
    print(
        f"  vector ranking against an exact scan (in process p50 {exact_ms:.1f} ms); search's path for this user: {default_path}"
    )
    for label, r in recalls.items():
        print(
            f"  {label}: recall@10 {r['recall@10']:.4f} (min {r['min_recall@10']:.2f}; within 1e-3 of the exact 10th's "
            f"distance, as ann-benchmarks counts: {r['near_recall@10']:.4f}), short pages {r['short_pages']}/{r['n']}, "
            f"in-process p50 / p95 {r['p50_ms']:.1f} / {r['p95_ms']:.1f} ms"
        )
    print(f"  in-process hybrid latency split, median ms: {split}")
    print_storage(storage())


if __name__ == "__main__":
    main()
