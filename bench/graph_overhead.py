"""What reading the knowledge graph costs indexing: chunks/s with the graph and without, in one run.

Takes paragraphs of the 2WikiMultiHopQA corpus that bench/twowiki.py indexed (run that first: it
leaves them in the `cairn_bench_2wiki` database, 6,119 titles in one team, so the title automaton
and the entity table are the size a real team's would be). Each pass deletes the sample's chunks
(their vectors too, so every pass embeds them again) and indexes the sample through the real
service, alternately without and with the graph, several rounds, so drift in the machine's speed
falls on both sides. Reports chunks/s for each and the ratio, and the graph's own share of the
time indexing with it (timed where indexing calls it, which a shared machine's drift does not move).

Data: the 2Wiki index bench/twowiki.py left in the embedded database `--database` (default
cairn_bench_2wiki); the sample is left indexed with its graph facts, as it was.
Takes: a minute or two with the defaults (300 paragraphs, four passes, then the sample indexed again).

Reproduce:  .venv/bin/python bench/graph_overhead.py [--docs 300 --rounds 2]
            .venv/bin/python bench/graph_overhead.py --docs 100 --rounds 1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=300, help="paragraphs indexed per pass")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of passes (without, with)")
    parser.add_argument(
        "--database",
        default=os.environ.get("CAIRN_EMBEDDED_DATABASE", "cairn_bench_2wiki"),
        help="embedded database bench/twowiki.py indexed 2Wiki into (default: %(default)s)",
    )
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database

    import django

    django.setup()
    from django.conf import settings

    from documents.models import Document
    from permissions.models import Team
    from rag.indexing import pipeline
    from rag.indexing.pipeline import index_documents
    from rag.models import Chunk, IndexStatus
    from rag.providers.embeddings import get_embedding_provider

    team = Team.objects.get(name="2Wiki")
    provider = get_embedding_provider()
    # Every twentieth paragraph by title: a spread of the corpus, not one alphabetical corner.
    ids = list(Document.objects.filter(team=team).order_by("title").values_list("pk", flat=True))[::20][: args.docs]
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"model: {provider.model_id}, sample: {len(ids)} of the team's {Document.objects.filter(team=team).count()} paragraphs")
    provider.embed(["warm up the model"] * 4)
    rates: dict[bool, list[float]] = {False: [], True: []}
    # The graph's own work, timed where indexing calls it: on a shared machine the two rates drift,
    # while this share does not.
    graph_seconds = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                graph_seconds[0] += time.perf_counter() - started

        return wrapper

    for name in ("team_graph", "write_document_facts", "link_title_mentions"):
        setattr(pipeline, name, timed(getattr(pipeline, name)))
    with_graph_seconds = 0.0
    try:
        for _ in range(args.rounds):
            for graph in (False, True):
                settings.RAG_GRAPH_ENABLED = graph
                Chunk.objects.filter(document_id__in=ids).delete()
                IndexStatus.objects.filter(document_id__in=ids).delete()
                started = time.perf_counter()
                chunks = 0
                for i in range(0, len(ids), 64):
                    chunks += index_documents(document_ids=ids[i : i + 64], provider=provider).chunks
                elapsed = time.perf_counter() - started
                rate = chunks / elapsed
                rates[graph].append(rate)
                with_graph_seconds += elapsed if graph else 0.0
                print(f"  graph {'on ' if graph else 'off'}: {chunks} chunks, {rate:.2f} chunks/s", flush=True)
    finally:
        # Leave the sample indexed with its graph facts, as bench/twowiki.py left it.
        settings.RAG_GRAPH_ENABLED = True
        counted = graph_seconds[0]
        index_documents(document_ids=ids, provider=provider, force=True)
        graph_seconds[0] = counted
    without, with_graph = (sum(rates[g]) / len(rates[g]) for g in (False, True))
    print(
        f"indexing without the graph {without:.2f} chunks/s, with it {with_graph:.2f} chunks/s: ratio {with_graph / without:.3f}"
    )
    share = graph_seconds[0] / with_graph_seconds
    print(f"the graph's own work: {graph_seconds[0]:.1f}s of {with_graph_seconds:.1f}s indexing with it = {share:.1%}")


if __name__ == "__main__":
    main()
