"""Scoped searches beside unscoped ones: vector and hybrid latency, and HNSW recall@10 against exact, per scope.

A synthetic corpus (no model, no dataset needed): topics are random unit vectors in 384 dimensions,
each document leans towards one topic and each chunk towards its document, so the vectors cluster
the way a real model's do; each chunk's text draws most of its words from its topic's vocabulary,
so keyword search and the vectors agree on what is relevant. The index holds `--chunks` chunks of
two teams; the reader sees `--visible` of them (10% by default, the design target's shape), in
three collections holding 1%, 10% and 89% of what they see. Queries are topic points with noise
and a few of the topic's words; their vectors are put in the query-embedding cache, so search
runs as it does for a user (the fake provider is configured but never asked).

Each scope is searched in process through `rag.retrieval.search.search` (the code rag.search runs),
limit 10, threshold 0: p50 / p95 of the whole search and of its `vector_ms` stage, and short pages
(fewer than 10 results). Recall@10 compares the vector ranking through the HNSW index with an exact
scan of the same scope.

Data: generated (seeded); nothing to download. The corpus is built once into its own embedded database
(`cairn_bench_scoped_<chunks>`, with a manifest in var/) and reused.
Takes: building 100k chunks some minutes, once; measuring a few minutes.

Reproduce:  .venv/bin/python bench/scoped.py --chunks 100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = "bench-synthetic"
DIMENSION = 384
TOPICS = 300
VOCABULARY = 20_000
TOPIC_WORDS = 60
WORDS_PER_CHUNK = 90
# The reader's three collections, as shares of what they see.
SCOPES = {"1%": 0.01, "10%": 0.10, "rest": 0.89}


def database_name(chunks: int, visible: float) -> str:
    share = "" if visible == 0.10 else f"_v{round(visible * 100)}"
    return f"cairn_bench_scoped_{chunks}{share}"


def setup_django(database: str) -> None:
    os.environ["CAIRN_EMBEDDED_DATABASE"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["RAG_EMBEDDING_PROVIDER"] = "fake"
    os.environ["RAG_EMBEDDING_MODEL"] = MODEL
    os.environ["RAG_EMBEDDING_DIMENSION"] = str(DIMENSION)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


class Corpus:
    """Topics, their vocabularies and vectors: the same seed gives the same corpus and queries."""

    def __init__(self, seed: int = 11) -> None:
        self.rng = np.random.default_rng(11)  # topics and vocabularies: always the same
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        words: set[str] = set()
        while len(words) < VOCABULARY:
            words.add("".join(self.rng.choice(syllables, size=int(self.rng.integers(2, 4)))))
        self.words = np.array(sorted(words))
        # A direction every vector shares, as a real model's do (their cosines are mostly positive).
        common = self._unit(self.rng.normal(size=DIMENSION))
        self.centers = self._unit(common + 0.8 * self._unit(self.rng.normal(size=(TOPICS, DIMENSION))))
        self.vocab = [self.rng.choice(VOCABULARY, size=TOPIC_WORDS, replace=False) for _ in range(TOPICS)]
        ranks = np.arange(1, VOCABULARY + 1)
        self.zipf = (1 / ranks) / (1 / ranks).sum()
        self.rng = np.random.default_rng(seed)  # documents or queries drawn from them

    @staticmethod
    def _unit(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    def document(self, topic: int, chunks: int) -> tuple[list[str], np.ndarray]:
        doc = self._unit(self.centers[topic] + 0.9 * self._unit(self.rng.normal(size=DIMENSION)))
        vectors = self._unit(doc + 0.8 * self._unit(self.rng.normal(size=(chunks, DIMENSION))))
        texts = []
        for _ in range(chunks):
            topical = self.words[self.rng.choice(self.vocab[topic], size=int(WORDS_PER_CHUNK * 0.4))]
            common = self.words[self.rng.choice(VOCABULARY, size=int(WORDS_PER_CHUNK * 0.6), p=self.zipf)]
            text = np.concatenate([topical, common])
            self.rng.shuffle(text)
            texts.append(" ".join(text) + ".")
        return texts, vectors

    def query(self) -> tuple[str, np.ndarray]:
        topic = int(self.rng.integers(TOPICS))
        vector = self._unit(self.centers[topic] + 1.1 * self._unit(self.rng.normal(size=DIMENSION)))
        return " ".join(self.words[self.rng.choice(self.vocab[topic], size=4, replace=False)]), vector


def build(chunks: int, visible: float) -> dict:
    """Create (or reuse) the corpus; returns the reader's name and the scopes' collection ids and sizes."""
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Sum
    from django.utils import timezone

    from documents.models import Collection, CollectionMembership, Document
    from permissions.models import Access, Role, Team, User
    from rag.corpus import vector_index as vector_index_module
    from rag.corpus.vector_index import ensure_vector_index, vector_index_name
    from rag.indexing.keyword_postings import refresh_search_vectors
    from rag.indexing.pipeline import content_hash
    from rag.models import IndexState, IndexStatus

    call_command("migrate", verbosity=0)
    manifest = ROOT / "var" / f"{database_name(chunks, visible)}.json"
    team = Team.objects.filter(name="Scoped bench").first()
    counted = IndexStatus.objects.filter(model_id=MODEL, state=IndexState.INDEXED).aggregate(n=Sum("chunk_count"))["n"]
    if team and counted == chunks and manifest.exists():
        return json.loads(manifest.read_text())
    with connection.cursor() as cursor:  # the bench's own database: start again from nothing
        cursor.execute(f"TRUNCATE {Team._meta.db_table} CASCADE")
    team, other = Team.objects.create(name="Scoped bench"), Team.objects.create(name="Scoped other")
    reader = User.objects.create(username=f"scoped-reader-{team.pk.hex[:6]}", team=team)
    scopes = {label: Collection.objects.create(team=team, name=f"Scope {label}", default_access=Access.NONE) for label in SCOPES}
    for collection in scopes.values():
        CollectionMembership.objects.create(collection=collection, user=reader, role=Role.READ)
    hidden = [Collection.objects.create(team=team, name=f"Hidden {i}", default_access=Access.NONE) for i in range(4)]
    elsewhere = Collection.objects.create(team=other, name="Other team", default_access=Access.READ)
    # Where each chunk goes: the reader's scopes get their shares of `visible`; the rest is split
    # between hidden collections of the same team and another team. Documents are interleaved, as
    # a knowledge base's collections grow side by side.
    targets = [(scopes[label], int(chunks * visible * share)) for label, share in SCOPES.items()]
    rest = chunks - sum(n for _, n in targets)
    targets += [(c, rest // 8) for c in hidden] + [(elsewhere, rest - 4 * (rest // 8))]
    corpus = Corpus()
    remaining = {c.pk: n for c, n in targets}
    by_pk = {c.pk: c for c, _ in targets}
    now = timezone.now()
    made, started = 0, time.perf_counter()
    sizes: dict[uuid.UUID, int] = dict.fromkeys(remaining, 0)
    with connection.cursor() as cursor:
        # Built once at the end: inserting into a live HNSW index is many times slower.
        cursor.execute(f"DROP INDEX IF EXISTS {vector_index_name(MODEL, DIMENSION)}")
        while made < chunks:
            docs, statuses, rows = [], [], []
            for _ in range(2000):
                open_ = [pk for pk, n in remaining.items() if n > 0]
                if not open_:
                    break
                weights = np.array([remaining[pk] for pk in open_], dtype=float)
                pk = open_[int(corpus.rng.choice(len(open_), p=weights / weights.sum()))]
                n = min(remaining[pk], int(corpus.rng.integers(1, 6)))
                remaining[pk] -= n
                sizes[pk] += n
                collection = by_pk[pk]
                topic = int(corpus.rng.integers(TOPICS))
                texts, vectors = corpus.document(topic, n)
                doc = Document(
                    team_id=collection.team_id,
                    collection=collection,
                    title=" ".join(texts[0].split()[:4]).title(),
                    text="\n\n".join(texts),
                    created_by=reader if collection.team_id == team.pk else None,
                    published_at=now,
                    created_at=now,
                    updated_at=now,
                )
                docs.append(doc)
                statuses.append(
                    IndexStatus(
                        document=doc,
                        model_id=MODEL,
                        state=IndexState.INDEXED,
                        indexed_version=1,
                        indexed_text_hash=content_hash(doc.text),
                        chunk_count=n,
                        updated_at=now,
                    )
                )
                offset = 0
                for index, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
                    rows.append(
                        (
                            doc.pk,
                            doc.team_id,
                            index,
                            text,
                            1,
                            hashlib.sha256(f"{doc.pk}:{index}".encode()).hexdigest(),
                            MODEL,
                            "[" + ",".join(f"{x:.6g}" for x in vector) + "]",
                            offset,
                            offset + len(text),
                            "{}",
                            0,
                            now,
                        )
                    )
                    offset += len(text) + 2
                made += n
            Document.objects.bulk_create(docs, batch_size=2000)
            IndexStatus.objects.bulk_create(statuses, batch_size=2000)
            with cursor.cursor.copy(
                "COPY document_embeddings (document_id, team_id, chunk_index, chunk_text, document_version, content_hash, "
                "model_id, embedding, start_offset, end_offset, metadata, doc_length, created_at) FROM STDIN"
            ) as copy_in:
                for row in rows:
                    copy_in.write_row(row)
            refresh_search_vectors(document_ids=[d.pk for d in docs], model_id=MODEL)
            print(f"  built {made}/{chunks} chunks ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
        cursor.execute("SET maintenance_work_mem = '1GB'")
        started = time.perf_counter()
        vector_index_module._ensured.clear()
        ensure_vector_index(MODEL, DIMENSION)
        print(f"  HNSW index built in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        cursor.execute("VACUUM ANALYZE")
    document = Document.objects.filter(collection=scopes["10%"]).order_by("pk").first()
    result = {
        "reader": reader.username,
        "chunks": chunks,
        "visible": sum(sizes[c.pk] for c in scopes.values()),
        "scopes": {label: {"collection": str(c.pk), "chunks": sizes[c.pk]} for label, c in scopes.items()},
        "document": str(document.pk) if document else None,
    }
    manifest.parent.mkdir(exist_ok=True)
    manifest.write_text(json.dumps(result))
    return result


def seed_query_cache(queries: list[tuple[str, np.ndarray]]) -> None:
    """Put each query's vector where search looks for it first (rag.retrieval.query's cache)."""
    from django.core.cache import cache

    from rag.retrieval.query import QUERY_CACHE_SECONDS, normalise_query

    for text, vector in queries:
        key = "rag:q:" + hashlib.sha256(f"{MODEL}\x00{normalise_query(text)}".encode()).hexdigest()
        cache.set(key, np.asarray(vector, dtype=np.float32).tobytes(), QUERY_CACHE_SECONDS)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def measure_latency(user, scopes: dict[str, dict], queries: list[tuple[str, np.ndarray]], modes: list[str]) -> list[dict]:
    from rag.retrieval.search import search

    rows = []
    for mode in modes:
        for label, scope in scopes.items():
            kwargs: dict[str, Any] = {k: uuid.UUID(v) for k, v in scope.items() if k in ("collection_id", "document_id")}
            totals, vector_ms, short = [], [], 0
            stages: dict[str, list[float]] = {}
            for text, _ in queries[:5]:  # warm: connections, plans, caches of the scope's statistics
                search(user=user, query=text, limit=10, threshold=0.0, mode=mode, **kwargs)
            for text, _ in queries:
                started = time.perf_counter()
                result = search(user=user, query=text, limit=10, threshold=0.0, mode=mode, **kwargs)
                totals.append((time.perf_counter() - started) * 1000)
                vector_ms.append(result.latency.get("vector_ms", 0.0))
                for stage, ms in result.latency.items():
                    stages.setdefault(stage, []).append(ms)
                short += len(result.hits) < min(10, scope["chunks"])
            rows.append(
                {
                    "mode": mode,
                    "scope": label,
                    "chunks": scope["chunks"],
                    "p50": statistics.median(totals),
                    "p95": percentile(totals, 0.95),
                    "vector_p50": statistics.median(vector_ms),
                    "vector_p95": percentile(vector_ms, 0.95),
                    "short": short,
                    "n": len(totals),
                    "stages": {stage: round(statistics.median(ms), 1) for stage, ms in stages.items()},
                    "path": chosen_path(scope["chunks"], limit=10 if mode == "vector" else 50),
                }
            )
            print(
                f"  {mode:6s} {label:9s} ({scope['chunks']:>6} chunks) p50 {rows[-1]['p50']:6.1f} ms  p95 {rows[-1]['p95']:6.1f} ms"
                f"  vector_ms p50 {rows[-1]['vector_p50']:6.1f}  p95 {rows[-1]['vector_p95']:6.1f}  short {short}/{len(totals)}  path {rows[-1]['path']}"
                f"  stages {rows[-1]['stages']}",
                flush=True,
            )
    return rows


def measure_recall(user, scopes: dict[str, dict], queries: list[tuple[str, np.ndarray]]) -> list[dict]:
    """Vector ranking through HNSW (as search would walk it) against an exact scan of the same scope."""
    from rag.retrieval.vector import vector_ranking
    from rag.retrieval.visibility import search_scope

    rows = []
    for label, scope in scopes.items():
        compiled = search_scope(
            user=user,
            collection_id=uuid.UUID(scope["collection_id"]) if scope.get("collection_id") else None,
            document_id=uuid.UUID(scope["document_id"]) if scope.get("document_id") else None,
        )
        recalls, short, exact_ms, hnsw_ms = [], 0, [], []
        for _, vector in queries:
            common = {"scope": compiled, "vector": vector.tolist(), "model_id": MODEL, "dimension": DIMENSION, "limit": 10}
            started = time.perf_counter()
            exact = vector_ranking(**common, threshold=-1, **forced(scope, exact=True))
            exact_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            hnsw = vector_ranking(**common, threshold=-1, **forced(scope, exact=False))
            hnsw_ms.append((time.perf_counter() - started) * 1000)
            short += len(hnsw) < len(exact)
            kth = exact[-1].score if exact else 0.0
            recalls.append(sum(h.score >= kth - 1e-6 for h in hnsw) / max(len(exact), 1))
        rows.append(
            {
                "scope": label,
                "recall": statistics.mean(recalls),
                "min": min(recalls),
                "short": short,
                "exact_p50": statistics.median(exact_ms),
                "hnsw_p50": statistics.median(hnsw_ms),
                "n": len(recalls),
            }
        )
        print(
            f"  recall@10 {label:9s} HNSW vs exact {rows[-1]['recall']:.4f} (min {rows[-1]['min']:.2f}), short {short}/{len(recalls)};"
            f" vector ranking p50 exact {rows[-1]['exact_p50']:.1f} ms, HNSW {rows[-1]['hnsw_p50']:.1f} ms",
            flush=True,
        )
    return rows


def chosen_path(scope_chunks: int, *, limit: int) -> str:
    """The vector path search takes for a scope of this size (before the cost model: the old fixed limit)."""
    from django.conf import settings

    from rag.retrieval import vector

    if hasattr(vector, "choose_path"):
        from rag.retrieval.stats import model_chunk_count

        return vector.choose_path(limit=limit, scope_chunks=scope_chunks, model_chunks=model_chunk_count(MODEL))
    return "exact" if scope_chunks <= settings.RAG_EXACT_SEARCH_MAX_CHUNKS else "hnsw"


def forced(scope: dict, *, exact: bool) -> dict:
    """The arguments that make vector_ranking take one path whatever the scope's size."""
    import inspect

    from rag.retrieval.vector import vector_ranking

    if "path" in inspect.signature(vector_ranking).parameters:
        from rag.retrieval.stats import model_chunk_count

        return {"path": "exact" if exact else "hnsw", "scope_chunks": scope["chunks"], "model_chunks": model_chunk_count(MODEL)}
    return {"scope_chunks": 0 if exact else 10**9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--visible", type=float, default=0.10, help="share of the chunks the reader sees")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode and scope")
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--modes", default="vector,hybrid")
    args = parser.parse_args()
    setup_django(database_name(args.chunks, args.visible))
    print(f"command: {' '.join([sys.executable, *sys.argv])}", flush=True)
    corpus_info = build(args.chunks, args.visible)
    from permissions.models import User

    user = User.objects.get(username=corpus_info["reader"])
    scopes: dict[str, dict] = {}
    if corpus_info["document"]:
        from rag.models import IndexStatus

        size = IndexStatus.objects.get(document_id=corpus_info["document"], model_id=MODEL).chunk_count
        scopes["document"] = {"document_id": corpus_info["document"], "chunks": size}
    for label in ("1%", "10%"):
        scope = corpus_info["scopes"][label]
        scopes[label] = {"collection_id": scope["collection"], "chunks": scope["chunks"]}
    scopes["unscoped"] = {"chunks": corpus_info["visible"]}
    asker = Corpus(seed=99)
    queries = [asker.query() for _ in range(max(args.queries, args.recall_queries))]
    seed_query_cache(queries)
    print(
        f"{args.chunks} chunks in the index; the reader sees {corpus_info['visible']} "
        f"({corpus_info['visible'] / args.chunks:.0%}); scopes: "
        + ", ".join(f"{label} {s['chunks']}" for label, s in scopes.items()),
        flush=True,
    )
    recall = measure_recall(user, {k: v for k, v in scopes.items() if k != "document"}, queries[: args.recall_queries])
    latency = measure_latency(user, scopes, queries[: args.queries], args.modes.split(","))
    out = ROOT / "var" / f"{database_name(args.chunks, args.visible)}-results.json"
    out.write_text(json.dumps({"corpus": corpus_info, "latency": latency, "recall": recall}, indent=1))
    print(f"results in {out}")


if __name__ == "__main__":
    main()
