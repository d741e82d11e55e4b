"""Multi-hop extractive answers: is the gold answer in the answer, in the passages it cites, and is "high" right?

Asks each training question of 2WikiMultiHopQA (or MuSiQue) as rag.answer does with no LLM: retrieval
as the asker (hybrid search with the graph, 5 passages, the evidence gate, the graph's facts), then the
extractive answer and its confidence, over the corpus bench/twowiki.py indexed into its database. The
retrievals are kept (`--retrievals`, by default in /tmp) with the MiniLM vectors of the question and
of every sentence of its passages, so that the answer's rules can be compared on the same retrievals:
the rules at `--before` (default: the merge base with main, loaded from git) and this tree's, in one run.

  in answer    the share of questions whose gold answer (or an alias) is in the answer's text
  in cited     the share whose gold answer is in the passages the answer cites
  in passages  the share whose gold answer is in any of the 5 passages retrieved: what "in cited" can reach
               (a yes-or-no gold is in none)
  reliability  each confidence level: how many answers have it, and the share of them that are right
               (gold in the answer's text)

Matching is SQuAD's normalisation (lower case, accents, punctuation and articles dropped), on word
boundaries. The questions are split in two halves by a hash of their id: rules are tuned on the
first ("tune") and reported on both, so a gain that holds only on the questions it was tuned on shows.

Data: ../shared/datasets/2wiki and ../shared/datasets/musique (see their README.md), indexed first
with bench/twowiki.py into cairn_bench_2wiki and cairn_bench_musique.
Takes: the first run retrieves (about 2 s a question on quiet cores, far more on shared ones); later
runs, on the kept retrievals, take seconds.

Reproduce:  .venv/bin/python bench/multihop_answers.py
            .venv/bin/python bench/multihop_answers.py --dataset ../shared/datasets/musique --database cairn_bench_musique
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import types
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
os.environ.setdefault("CAIRN_EMBEDDED_SHARED_BUFFERS", "256MB")
os.environ["RAG_EMBEDDING_PROVIDER"] = "local"
os.environ["RAG_LLM_MODEL"] = ""  # the extractive answer, whatever the environment configures
os.environ["RAG_ANSWER_CACHE"] = "false"
DATASET = ROOT.parent / "shared" / "datasets" / "2wiki"
LEVELS = ("high", "medium", "low", "insufficient")


def normalise(text: str) -> str:
    """SQuAD's answer normalisation, accents folded too."""
    text = unicodedata.normalize("NFKD", text.lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains(text: str, answers: list[str]) -> bool:
    haystack = f" {normalise(text)} "
    return any(needle and f" {needle} " in haystack for needle in map(normalise, answers))


def half(question_id: str) -> str:
    return "tune" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "held-out"


def old_module(rev: str, path: str, name: str) -> types.ModuleType:
    """`path` as it was at `rev`, as a module of its own."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up there
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def retrievals(args: argparse.Namespace, questions: list[dict]) -> dict[str, tuple]:
    """Each question's retrieval as rag.answer makes it (passages, facts, evidence gate), with the MiniLM vectors of
    the question and of every sentence of its passages; kept in `--retrievals` so the answers can be made again
    without searching (the answer's rules are what this benchmark compares)."""
    cache_file = args.retrievals or Path(f"/tmp/cairn-bench-retrievals-{args.database}.pickle")
    kept: dict[str, tuple] = pickle.loads(cache_file.read_bytes()) if cache_file.exists() else {}
    missing = [q for q in questions if q["_id"] not in kept]
    if missing:
        from permissions.models import Team, User
        from rag.answering.extractive import _sentences
        from rag.answering.passages import retrieve
        from rag.providers.embeddings import get_embedding_provider
        from rag.retrieval.query import embed_query

        team = Team.objects.get(name="2Wiki")  # the team bench/twowiki.py indexes into, whatever the dataset
        user = User.objects.get(team=team, username="2wiki-reader")
        provider = get_embedding_provider()
        for i, q in enumerate(missing):
            retrieval = retrieve(user=user, query=q["text"], limit=5)
            texts = list(dict.fromkeys(s.text for p in retrieval.passages for s in _sentences(p)))
            vectors = dict(zip(texts, provider.embed(texts), strict=True)) if texts else {}
            kept[q["_id"]] = (retrieval, embed_query(q["text"]), vectors)
            if i % 25 == 24:
                cache_file.write_bytes(pickle.dumps(kept))
                print(f"  retrieved {i + 1}/{len(missing)}", file=sys.stderr, flush=True)
        cache_file.write_bytes(pickle.dumps(kept))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--database", default="cairn_bench_2wiki")
    parser.add_argument("--queries", type=int, default=None, help="only the first N questions")
    parser.add_argument("--before", default=None, help="git revision of the 'before' rules (default: merge base with main)")
    parser.add_argument("--retrievals", type=Path, default=None, help="where the retrievals are kept (default: /tmp)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each question the answer misses")
    parser.add_argument("--dump", type=Path, default=None, help="write each question's answer as JSON lines")
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database
    before_rev = (
        args.before
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
    )

    import django

    django.setup()
    import numpy as np

    from rag.answering import extractive
    from rag.answering.answer import MODE_EXTRACTIVE, MODE_INSUFFICIENT, answer_confidence
    from rag.answering.citations import clean_citations
    from rag.models import Confidence
    from rag.providers.embeddings import get_embedding_provider

    questions = [json.loads(line) for line in (args.dataset / "queries.train.jsonl").open()]
    questions = sorted(questions, key=lambda q: q["_id"])[: args.queries]
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    kept = retrievals(args, questions)
    before = old_module(before_rev, "rag/answering/extractive.py", "extractive_before")
    rules = {f"before ({before_rev[:7]})": before, "now": extractive}
    dump = args.dump.open("w") if args.dump else None
    print(f"dataset: {args.dataset.name}, {len(questions)} questions; passages: 5, extractive (no LLM)")
    for name, module in rules.items():
        totals: dict[str, Counter] = defaultdict(Counter)
        reliability: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for q in questions:
            retrieval, query_vector, vectors = kept[q["_id"]]
            gold = [q["answer"], *q.get("answer_aliases", [])]
            question = np.asarray(query_vector, dtype=np.float32)

            def similarity(query: str, texts: list[str]) -> list[float]:
                # Rules that split sentences otherwise than the kept retrieval's read sentences not embedded yet.
                if new := [t for t in dict.fromkeys(texts) if t not in vectors]:  # noqa: B023
                    vectors.update(zip(new, get_embedding_provider().embed(new), strict=True))  # noqa: B023
                return [float(np.asarray(vectors[t], dtype=np.float32) @ question) for t in texts]  # noqa: B023

            passages = {p.n: p for p in retrieval.passages}
            if retrieval.confidence == Confidence.INSUFFICIENT:
                text, mode, support = extractive.INSUFFICIENT_ANSWER, MODE_INSUFFICIENT, None
            else:
                made = module.extract(retrieval.query, retrieval.passages, facts=retrieval.facts, similarity=similarity)
                text = made.text
                mode = MODE_INSUFFICIENT if text == extractive.INSUFFICIENT_ANSWER else MODE_EXTRACTIVE
                support = made.support() if hasattr(made, "support") else None
            text, cited = clean_citations(text, set(passages))
            level = str(answer_confidence(passages, mode=mode, cited=cited, support=support).level)
            cited_text = "\n".join(passages[n].text for n in cited)
            right = contains(text, gold)
            in_passages = contains("\n".join(p.text for p in retrieval.passages), gold)
            row = {"in answer": right, "in cited": contains(cited_text, gold), "in passages": in_passages}
            for part in ("all", half(q["_id"])):
                totals[part]["questions"] += 1
                totals[part].update(k for k, v in row.items() if v)
                reliability[(part, level)]["count"] += 1
                reliability[(part, level)]["right"] += right
            if args.verbose and not right and name == "now":
                print(f"  MISS {q['text']} -> {q['answer']!r}\n    {text[:600]!r}")
            if dump and name == "now":
                record = {"id": q["_id"], "question": q["text"], "gold": gold, **row, "confidence": level, "answer": text}
                dump.write(json.dumps(record) + "\n")
        print(f"\nrules: {name}")
        print("| questions | n | gold in answer | gold in cited passages | gold in any passage |")
        print("|---|---|---|---|---|")
        for part in ("tune", "held-out", "all"):
            t = totals[part]
            n = max(1, t["questions"])
            print(
                f"| {part} | {t['questions']} | {t['in answer'] / n:.3f} | {t['in cited'] / n:.3f} | {t['in passages'] / n:.3f} |"
            )
        print("| questions | level | count | share of answers | right (gold in answer) |")
        print("|---|---|---|---|---|")
        for part in ("tune", "held-out", "all"):
            n = max(1, totals[part]["questions"])
            for level_name in LEVELS:
                c = reliability[(part, level_name)]
                share = f"{c['right'] / c['count']:.3f}" if c["count"] else "-"
                print(f"| {part} | {level_name} | {c['count']} | {c['count'] / n:.3f} | {share} |")


if __name__ == "__main__":
    main()
