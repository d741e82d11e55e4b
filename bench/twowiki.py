"""2WikiMultiHopQA (HippoRAG's subset, train split): multi-hop retrieval through the real pipeline.

Loads the 6,119 paragraphs as documents of one team (title as the document's title, the paragraph
under it as its text), indexes them with the real indexing service (chunks, embeddings with the
configured provider, keyword postings and the knowledge graph's facts), then runs the 500 training
questions through the real search code and reports Recall@2 and Recall@5 over distinct paragraphs
for vector, keyword, graph, hybrid without the graph (weights 1,1,0) and hybrid with it.

Data: 2WikiMultiHopQA as the HippoRAG papers use it (6,119 paragraphs, the first 500 of its 1,000
questions), by default ../shared/datasets/2wiki beside the repository (`--dataset`, or the
TWOWIKI_DIR environment variable). MuSiQue and HotpotQA in ../shared/datasets/ have the same layout
(corpus.jsonl, queries.train.jsonl, qrels.train.tsv) and run the same way, each into its own database.
The index is kept in the embedded database `--database` (default cairn_bench_2wiki), which
bench/graph_overhead.py reads.
Takes: about 5 minutes to index 2Wiki with the onnx encoder on 2 vCPUs (HotpotQA under 3, MuSiQue about
15), and a minute or two to evaluate the five modes (`--skip-index`).

Reproduce:  .venv/bin/python bench/twowiki.py                  (index, then evaluate; local MiniLM)
            .venv/bin/python bench/twowiki.py --skip-index     (evaluate again on the indexed corpus)
            .venv/bin/python bench/twowiki.py --dataset ../shared/datasets/musique --database cairn_bench_musique
            .venv/bin/python bench/twowiki.py --dataset ../shared/datasets/hotpotqa --database cairn_bench_hotpotqa
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# The shared datasets sit beside the repository; TWOWIKI_DIR points elsewhere.
DATASET = Path(os.environ.get("TWOWIKI_DIR", ROOT.parent / "shared" / "datasets" / "2wiki"))

# mode name -> (search mode, hybrid weights)
MODES = {
    "vector": ("vector", None),
    "keyword": ("keyword", None),
    "graph": ("graph", None),
    "hybrid-no-graph": ("hybrid", (1.0, 1.0, 0.0)),
    "hybrid": ("hybrid", None),
}


def load_dataset(dataset: Path) -> tuple[list[dict], dict[str, str], dict[str, set[str]]]:
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (dataset / "queries.train.jsonl").open())}
    qrels: dict[str, set[str]] = defaultdict(set)
    for line in (dataset / "qrels.train.tsv").open():
        qid, did, _ = line.split("\t")
        qrels[qid].add(did)
    return corpus, queries, qrels


def document_text(paragraph: dict) -> str:
    return f"# {paragraph['title']}\n\n{paragraph['text']}"


def recall_at(ranked: list[str], relevant: set[str], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET, help="the corpus, questions and qrels (default: %(default)s)")
    parser.add_argument(
        "--database",
        default=os.environ.get("CAIRN_EMBEDDED_DATABASE", "cairn_bench_2wiki"),
        help="embedded database that keeps the index (default: %(default)s)",
    )
    parser.add_argument("--skip-index", action="store_true", help="reuse the indexed corpus")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--queries", type=int, default=None, help="evaluate only the first N questions")
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from documents.models import Collection, Document
    from permissions.models import Access, Team, User
    from rag.indexing.pipeline import index_documents
    from rag.models import Chunk
    from rag.providers.embeddings import get_embedding_provider
    from rag.retrieval.search import search

    corpus, queries, qrels = load_dataset(args.dataset)
    provider = get_embedding_provider()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"model: {provider.model_id} ({settings.RAG_EMBEDDING_PROVIDER}), corpus: {len(corpus)} paragraphs of {args.dataset}")
    team = Team.objects.filter(name="2Wiki").first() or Team.objects.create(name="2Wiki")
    user = User.objects.filter(username="2wiki-reader").first() or User.objects.create(username="2wiki-reader", team=team)
    collection = Collection.objects.filter(team=team).first() or Collection.objects.create(
        team=team, name="2Wiki", default_access=Access.READ
    )

    if not args.skip_index:
        Chunk.objects.filter(team=team).delete()
        Document.objects.filter(team=team).delete()
        now = timezone.now()
        Document.objects.bulk_create(
            [
                Document(
                    team=team,
                    collection=collection,
                    title=p["title"],
                    text=document_text(p),
                    published_at=now,
                    created_at=now,
                    updated_at=now,
                )
                for p in corpus
            ],
            batch_size=1000,
        )
        ids = list(Document.objects.filter(team=team).order_by("title").values_list("pk", flat=True))
        started = time.perf_counter()
        chunks = 0
        for i in range(0, len(ids), 64):
            chunks += index_documents(document_ids=ids[i : i + 64], provider=provider).chunks
            print(f"  indexed {min(i + 64, len(ids))}/{len(ids)} paragraphs", file=sys.stderr, flush=True)
        print(f"indexed {len(ids)} paragraphs, {chunks} chunks, in {time.perf_counter() - started:.0f}s", flush=True)

    # By the whole text, not the title: MuSiQue has paragraphs that share a title.
    text_to_id = {document_text(p): p["_id"] for p in corpus}
    doc_to_corpus = {pk: text_to_id.get(text) for pk, text in Document.objects.filter(team=team).values_list("pk", "text")}
    if unmatched := sum(corpus_id is None for corpus_id in doc_to_corpus.values()):
        print(f"warning: {unmatched} of the team's documents match no paragraph of {args.dataset}", flush=True)
    evaluated = [q for q in sorted(queries) if q in qrels][: args.queries]
    for name in args.modes.split(","):
        mode, weights = MODES[name]
        r2, r5, latencies = [], [], []
        for qid in evaluated:
            started = time.perf_counter()
            result = search(user=user, query=queries[qid], limit=30, threshold=0.0, mode=mode, weights=weights)
            latencies.append(time.perf_counter() - started)
            ranked: list[str] = []
            for hit in result.hits:
                corpus_id = doc_to_corpus.get(hit.document_id) if hit.document_id else None
                if corpus_id and corpus_id not in ranked:
                    ranked.append(corpus_id)
            r2.append(recall_at(ranked, qrels[qid], 2))
            r5.append(recall_at(ranked, qrels[qid], 5))
        latencies.sort()
        print(
            f"{name:16s} Recall@2 {sum(r2) / len(r2):.4f}  Recall@5 {sum(r5) / len(r5):.4f}  "
            f"({len(evaluated)} questions, in-process p50 {latencies[len(latencies) // 2] * 1000:.1f} ms)",
            flush=True,
        )


if __name__ == "__main__":
    main()
