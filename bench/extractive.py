"""Precision and recall of the sentences extractive answers quote, over the hand-written demo questions.

The demo corpus alice reads (tests/rag/answering/extractive_cases.py) is indexed with the local
MiniLM model into its own embedded database (`cairn_bench_extractive`); each question goes through
`retrieve` as alice (hybrid search, 5 passages, the evidence gate, the graph's facts) and then
through each selection:

  before   the selection at --before (default: main's merge base), loaded from git: the best
           sentence of each of the top three passages
  lexical  this tree's relevance test by words alone (what any provider but the local one gets)
  minilm   this tree's relevance test with MiniLM sentence similarities (the default with the local model)

Precision: quoted sentences that are expected or acceptable, of all quoted (a quote in answer to an
unanswerable question is wrong). Recall: expected sentences quoted, of all expected. Micro-averaged.
The minilm row's time is with the sentence-vector cache cleared before each question (cold), the
last row's with the vectors the minilm row left in it (the question's vector is cached in both, as
`retrieve` leaves it).

Data: the hand-written questions and expected sentences in tests/rag/answering/extractive_cases.py, over
the demo documents; nothing to download. `--before` needs a git checkout with `main`.
Takes: about a minute (the demo indexed with MiniLM, then 30 questions through each selection).

Reproduce:  .venv/bin/python bench/extractive.py [--before REV] [-v]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
os.environ.setdefault("CAIRN_EMBEDDED_DATABASE", "cairn_bench_extractive")
os.environ["RAG_EMBEDDING_PROVIDER"] = "local"
os.environ.pop("REDIS_URL", None)  # a process-local cache, so "cold" means cold


def old_module(rev: str) -> types.ModuleType:
    """rag/answering/extractive.py as it was at `rev`."""
    source = subprocess.run(
        ["git", "show", f"{rev}:rag/answering/extractive.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType("extractive_before")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"{rev}:rag/answering/extractive.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=None, help="git revision of the 'before' selection (default: merge base with main)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each wrong or missed sentence")
    args = parser.parse_args()
    before_rev = (
        args.before
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
    )

    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from documents.models import Collection, Document
    from permissions.models import Access, Team, User
    from rag.answering import extractive
    from rag.answering.passages import retrieve
    from rag.indexing.pipeline import index_documents
    from rag.models import Confidence
    from rag.providers.embeddings import get_embedding_provider
    from rag.retrieval.query import embed_query
    from tests.rag.answering.extractive_cases import CASES, Score, demo_texts

    provider = get_embedding_provider()
    team = Team.objects.filter(name="Extractive").first() or Team.objects.create(name="Extractive")
    user = User.objects.filter(username="extractive-reader").first() or User.objects.create(
        username="extractive-reader", team=team
    )
    collection = Collection.objects.filter(team=team).first() or Collection.objects.create(
        team=team, name="Demo", default_access=Access.READ
    )
    Document.objects.filter(team=team).delete()
    now = timezone.now()
    for title, text in demo_texts().items():
        Document.objects.create(
            team=team, collection=collection, title=title, text=text, published_at=now, created_at=now, updated_at=now
        )
    index_documents(document_ids=list(Document.objects.filter(team=team).values_list("pk", flat=True)), provider=provider)

    before = old_module(before_rev)
    selections = {
        f"before ({before_rev[:7]})": lambda q, r: before.extractive_answer(q, r.passages, facts=r.facts),
        "lexical": lambda q, r: extractive.extractive_answer(q, r.passages, facts=r.facts, similarity=lambda *_: None),
        "minilm": lambda q, r: extractive.extractive_answer(q, r.passages, facts=r.facts),
        "minilm, sentence vectors cached": lambda q, r: extractive.extractive_answer(q, r.passages, facts=r.facts),
    }
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"model: {provider.model_id}; {len(CASES)} questions, {sum(not c.expected for c in CASES)} of them unanswerable")
    provider.embed(["warm up the model"] * 4)
    retrievals = {case.question: retrieve(user=user, query=case.question, limit=5) for case in CASES}
    print("| selection | precision | recall | quoted | correct | expected found | unanswerable declined | ms p50 / max |")
    print("|---|---|---|---|---|---|---|---|")
    for name, select in selections.items():
        score, times = Score(), []
        for case in CASES:
            retrieval = retrievals[case.question]
            if "cached" not in name:
                cache.clear()
                embed_query(case.question)  # as retrieve() leaves it cached
            started = time.perf_counter()
            if retrieval.confidence == Confidence.INSUFFICIENT:
                answer = extractive.INSUFFICIENT_ANSWER  # the flow never asks for an extractive answer then
            else:
                answer = select(case.question, retrieval)
            times.append((time.perf_counter() - started) * 1000)
            score.add(case, answer)
        print(
            f"| {name} | {score.precision:.3f} | {score.recall:.3f} | {score.quoted} | {score.correct} | "
            f"{score.found}/{score.expected} | {score.declined}/{score.unanswerable} | "
            f"{statistics.median(times):.1f} / {max(times):.1f} |"
        )
        if args.verbose:
            for miss in score.misses:
                print(f"    {miss}")
    gated = sum(r.confidence == Confidence.INSUFFICIENT for r in retrievals.values())
    print(f"questions the evidence gate answered 'not enough information' before any selection: {gated}")


if __name__ == "__main__":
    main()
