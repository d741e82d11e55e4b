"""SciFact (train split): indexing throughput and retrieval quality through the real pipeline.

Loads the corpus as documents of one team, indexes them with the real indexing service
(chunking, embedding with the configured provider, database writes), times that against
the raw encoder on the same inputs, then runs every training query through the real
search code in each mode and reports nDCG@10 and Recall@100 (and each on two halves of the
claims, alternate ids, for held-out checks of a setting).

Data: BEIR SciFact, train split (5,183 abstracts, 809 claims with judgements), by default
../shared/datasets/scifact beside the repository (`--dataset`, or the SCIFACT_DIR environment
variable). The index is kept in the embedded database `--database` (default cairn_bench), which
bench/latency.py copies its corpus from.
Takes: 10 to 15 minutes to index and evaluate with the onnx encoder on 2 vCPUs; `--skip-throughput`
(evaluate the kept index again) a few minutes.

Reproduce:  .venv/bin/python bench/scifact.py                      (index the full corpus, then evaluate)
            .venv/bin/python bench/scifact.py --skip-throughput    (quality again on the indexed corpus)
            .venv/bin/python bench/scifact.py --database cairn_bench_tp --docs 300 --throughput-docs 300 --skip-quality   (throughput only)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# The shared datasets sit beside the repository; SCIFACT_DIR points elsewhere.
DATASET = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "datasets" / "scifact"))


def load_dataset(dataset: Path, limit: int | None):
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (dataset / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in list((dataset / "qrels" / "train.tsv").open())[1:]:
        qid, did, score = line.split()
        qrels[qid][did] = int(score)
    return corpus[:limit] if limit else corpus, queries, qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    hits = {d for d in ranked[:k] if relevant.get(d, 0) > 0}
    return len(hits) / len([d for d, r in relevant.items() if r > 0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder (default: %(default)s)")
    parser.add_argument(
        "--database",
        default=os.environ.get("CAIRN_EMBEDDED_DATABASE", "cairn_bench"),
        help="embedded database that keeps the index (default: %(default)s)",
    )
    parser.add_argument("--docs", type=int, default=None, help="index only the first N abstracts")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--throughput-docs", type=int, default=600, help="abstracts timed for the throughput figure")
    parser.add_argument("--skip-throughput", action="store_true", help="reuse the indexed corpus")
    parser.add_argument("--modes", default="vector,keyword,hybrid")
    parser.add_argument(
        "--limit", type=int, default=100, help="hits per search (Recall@100 needs 100; 10 fuses what a 10-hit page fuses)"
    )
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from documents.models import Collection, Document
    from permissions.models import Access, Team, User
    from rag.indexing.chunking import TextChunk
    from rag.indexing.pipeline import embedding_input, index_documents
    from rag.models import Chunk, IndexStatus
    from rag.providers.embeddings import get_embedding_provider
    from rag.retrieval.search import search

    corpus, queries, qrels = load_dataset(args.dataset, args.docs)
    provider = get_embedding_provider()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"model: {provider.model_id} ({settings.RAG_EMBEDDING_PROVIDER}), corpus: {len(corpus)} abstracts")

    team = Team.objects.filter(name="SciFact").first() or Team.objects.create(name="SciFact")
    user = User.objects.filter(username="scifact-reader").first() or User.objects.create(username="scifact-reader", team=team)
    collection = Collection.objects.filter(team=team).first() or Collection.objects.create(
        team=team, name="SciFact", default_access=Access.READ
    )

    if not args.skip_throughput:
        Chunk.objects.filter(team=team).delete()
        IndexStatus.objects.filter(document__team=team).delete()
        Document.objects.filter(team=team).delete()
        from django.utils import timezone

        now = timezone.now()
        Document.objects.bulk_create(
            [
                Document(
                    team=team,
                    collection=collection,
                    title=d["_id"],
                    text=f"# {d['title']}\n\n{d['text']}",
                    published_at=now,
                    created_at=now,
                    updated_at=now,
                )
                for d in corpus
            ],
            batch_size=1000,
        )
        ids = list(Document.objects.filter(team=team).order_by("created_at", "title").values_list("pk", flat=True))
        provider.embed(["warm up the model"] * 4)
        # Throughput on the first --throughput-docs abstracts: end to end through the indexing
        # service, then the raw encoder on exactly the inputs that produced, in the same run.
        sample = ids[: args.throughput_docs]
        start = time.perf_counter()
        chunks = 0
        for i in range(0, len(sample), 64):
            chunks += index_documents(document_ids=sample[i : i + 64], provider=provider).chunks
        end_to_end = time.perf_counter() - start
        inputs = list(
            Chunk.objects.filter(document_id__in=sample, model_id=provider.model_id).values_list("chunk_text", "metadata")
        )
        texts = [embedding_input(TextChunk(0, t, 0, 0, m["heading_path"], False, False, 0)) for t, m in inputs]
        start = time.perf_counter()
        for i in range(0, len(texts), 64):
            provider.embed(texts[i : i + 64])
        raw = time.perf_counter() - start
        print(
            f"indexing ({len(sample)} abstracts): {chunks} chunks in {end_to_end:.1f}s end to end = {chunks / end_to_end:.2f} chunks/s; "
            f"raw encoder on the same {len(texts)} inputs {len(texts) / raw:.2f} chunks/s; "
            f"ratio {(chunks / end_to_end) / (len(texts) / raw):.3f}",
            flush=True,
        )
        rest = ids[len(sample) :]
        for i in range(0, len(rest), 64):
            index_documents(document_ids=rest[i : i + 64], provider=provider)
            print(f"  indexed {len(sample) + min(i + 64, len(rest))}/{len(ids)} abstracts", file=sys.stderr, flush=True)

    if args.skip_quality:
        return
    doc_to_corpus = dict(Document.objects.filter(team=team).values_list("pk", "title"))
    evaluated = sorted((q for q in qrels if q in queries and any(d in {c["_id"] for c in corpus} for d in qrels[q])), key=int)
    relevant_scores: list[float] = []
    for mode in args.modes.split(","):
        ndcgs, recalls, latencies = [], [], []
        for qid in evaluated:
            t0 = time.perf_counter()
            result = search(user=user, query=queries[qid], limit=args.limit, threshold=0.0, mode=mode)
            latencies.append(time.perf_counter() - t0)
            ranked: list[str] = []
            for hit in result.hits:
                assert hit.document_id is not None, "search loads every hit's document id"
                corpus_id = doc_to_corpus.get(hit.document_id)
                if corpus_id and corpus_id not in ranked:
                    ranked.append(corpus_id)
            ndcgs.append(ndcg_at(ranked, qrels[qid]))
            recalls.append(recall_at(ranked, qrels[qid]))
            if mode == "vector":
                # Cosine of each relevant abstract's best chunk in the top 10: what a threshold would hide.
                best: dict[str, float] = {}
                for hit in result.hits[:10]:
                    assert hit.document_id is not None, "search loads every hit's document id"
                    corpus_id = doc_to_corpus.get(hit.document_id)
                    if corpus_id is not None and qrels[qid].get(corpus_id, 0) > 0:
                        best[corpus_id] = max(best.get(corpus_id, -1.0), hit.score)
                relevant_scores.extend(best.values())
        latencies.sort()
        # Two halves of the claims (alternate ids): a setting chosen on one half is checked on the other.
        halves = [ndcgs[0::2], ndcgs[1::2]]
        print(
            f"{mode:8s} nDCG@10 {sum(ndcgs) / len(ndcgs):.4f}  Recall@100 {sum(recalls) / len(recalls):.4f}  "
            f"(halves A {sum(halves[0]) / len(halves[0]):.4f} / B {sum(halves[1]) / len(halves[1]):.4f}; "
            f"{len(evaluated)} queries, in-process p50 {latencies[len(latencies) // 2] * 1000:.1f} ms)"
        )
    if relevant_scores:
        scores = sorted(relevant_scores)
        pct = {p: scores[int(p / 100 * (len(scores) - 1))] for p in (1, 5, 10, 50)}
        print(
            "threshold calibration: cosine of relevant abstracts found in the vector top 10 "
            f"(n={len(scores)}): p1 {pct[1]:.3f}, p5 {pct[5]:.3f}, p10 {pct[10]:.3f}, median {pct[50]:.3f}"
        )
        for threshold in (0.7, 0.5, 0.4, 0.3, settings.RAG_SIMILARITY_THRESHOLD, 0.2):
            hidden = sum(score < threshold for score in scores) / len(scores)
            print(f"  threshold {threshold:.2f} would hide {hidden:.1%} of them")


if __name__ == "__main__":
    main()
