"""Hybrid fusion's weights by 5-fold cross-validation on SciFact's train claims: what holds outside the claims tuned on.

Hybrid search fuses the vector, keyword and graph rankings as a weighted mean of their relevances
(rag.retrieval.fusion); RAG_HYBRID_WEIGHTS sets the three weights. A weight chosen on the claims it is
then scored on flatters itself, so here the claims are split into five folds (alternate claim ids, by
position); for each fold the grid's best weights on the other four are scored on it. Reported: each fold's
choice and its held-out nDCG@10, the mean and spread of those five figures (the estimate of what the
chosen weights do on claims not seen), and the configured weights' figure on the same folds, for
comparison. A weight that every fold chooses holds; one the folds disagree on is a tuned constant.

Every figure comes from the real search code (rag.retrieval.search with the weights passed per call), on the
index bench/scifact.py built (run that first: database `--database`, default cairn_bench). The query
embedding is computed once per claim and cached, so the grid costs little more than the rankings.

Data: BEIR SciFact, train split (809 claims), by default ../shared/datasets/scifact beside the repository
(`--dataset`, or SCIFACT_DIR).
Takes: on 2 vCPUs about 15 s per grid point (809 hybrid searches); the default grid of 15 points about
5 minutes.

Reproduce:  .venv/bin/python bench/fusion_cv.py
            .venv/bin/python bench/fusion_cv.py --vector-keyword 1 1.5 2 3 --graph 0 1 --folds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

from scifact import DATASET, load_dataset, ndcg_at  # noqa: E402  (bench/: the same corpus and measure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder (default: %(default)s)")
    parser.add_argument("--database", default="cairn_bench", help="the embedded database bench/scifact.py indexed")
    parser.add_argument(
        "--vector-keyword",
        type=float,
        nargs="+",
        default=[1.0, 1.5, 2.0, 2.5, 3.0],
        help="the vector ranking's weight for a keyword weight of 1 (the grid's first axis)",
    )
    parser.add_argument("--graph", type=float, nargs="+", default=[0.0, 0.5, 1.0], help="the graph ranking's weights")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=100, help="hits per search (as bench/scifact.py's headline figure)")
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database

    import django

    django.setup()
    from django.conf import settings

    from documents.models import Document
    from permissions.models import Team, User
    from rag.retrieval.search import search

    corpus, queries, qrels = load_dataset(args.dataset, None)
    team = Team.objects.filter(name="SciFact").first()
    if team is None or not Document.objects.filter(team=team).exists():
        sys.exit(f"no SciFact corpus in {args.database}: run bench/scifact.py first")
    user = User.objects.get(username="scifact-reader")
    doc_to_corpus = dict(Document.objects.filter(team=team).values_list("pk", "title"))
    corpus_ids = {c["_id"] for c in corpus}
    claims = sorted((q for q in qrels if q in queries and any(d in corpus_ids for d in qrels[q])), key=int)
    configured: tuple[float, ...] = tuple(settings.RAG_HYBRID_WEIGHTS)
    grid: list[tuple[float, ...]] = [(vk, 1.0, g) for vk in args.vector_keyword for g in args.graph]
    if configured not in grid:
        grid.append(configured)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"{len(claims)} claims, {args.folds} folds, {len(grid)} weightings (vector, keyword, graph); configured {configured}")

    # nDCG@10 of every claim under every weighting: the folds only regroup these.
    scores: dict[tuple[float, ...], list[float]] = {}
    for weights in grid:
        started = time.perf_counter()
        per_claim = []
        for qid in claims:
            result = search(user=user, query=queries[qid], limit=args.limit, threshold=0.0, mode="hybrid", weights=weights)
            ranked: list[str] = []
            for hit in result.hits:
                corpus_id = doc_to_corpus.get(hit.document_id) if hit.document_id else None
                if corpus_id and corpus_id not in ranked:
                    ranked.append(corpus_id)
            per_claim.append(ndcg_at(ranked, qrels[qid]))
        scores[weights] = per_claim
        print(
            f"  weights {_w(weights)}: nDCG@10 {statistics.fmean(per_claim):.4f} on all claims "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )

    folds = [list(range(k, len(claims), args.folds)) for k in range(args.folds)]
    held_out, configured_held_out, chosen = [], [], []
    for k, fold in enumerate(folds):
        fold_set = set(fold)
        train = [i for i in range(len(claims)) if i not in fold_set]
        best = max(grid, key=lambda w: (statistics.fmean(scores[w][i] for i in train), w == configured))
        chosen.append(best)
        held_out.append(statistics.fmean(scores[best][i] for i in fold))
        configured_held_out.append(statistics.fmean(scores[configured][i] for i in fold))
        print(
            f"fold {k + 1}: chose {_w(best)} (train {statistics.fmean(scores[best][i] for i in train):.4f}); "
            f"held-out {held_out[-1]:.4f}; configured {_w(configured)} held-out {configured_held_out[-1]:.4f}"
        )
    print(
        f"cross-validated nDCG@10: mean {statistics.fmean(held_out):.4f}, folds {min(held_out):.4f}–{max(held_out):.4f} "
        f"(sd {statistics.stdev(held_out):.4f})"
    )
    print(
        f"configured {_w(configured)} on the same folds: mean {statistics.fmean(configured_held_out):.4f}, "
        f"folds {min(configured_held_out):.4f}–{max(configured_held_out):.4f}"
    )
    agreed = len(set(chosen)) == 1
    print(
        "every fold chose the same weights: " + (f"yes, {_w(chosen[0])}" if agreed else "no: " + ", ".join(_w(w) for w in chosen))
    )


def _w(weights: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{w:g}" for w in weights) + ")"


if __name__ == "__main__":
    main()
