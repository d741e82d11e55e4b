"""Multi-hop extractive answers: is the gold answer in the answer, in the passages it cites, and is "high" right?

Asks each training question of 2WikiMultiHopQA (or MuSiQue) through the real answer flow with no LLM
(rag.answer's extractive mode: retrieval as the asker, the evidence gate, the graph's facts, the
extractive answer, its confidence), over the corpus bench/twowiki.py indexed into its database, and
reports:

  in answer   the share of questions whose gold answer (or one of its aliases) is in the answer's text
  in cited    the share whose gold answer is in the passages the answer cites
  retrieved   the share whose gold answer is in any of the passages the answer could use
  reliability each confidence level: how many answers have it, and the share of them that are right
              (gold in the answer's text)

Matching is SQuAD's normalisation (lower case, accents, punctuation and articles dropped), on word
boundaries. The questions are split in two halves by a hash of their id: rules are tuned on the
first ("tune") and reported on both, so a gain that holds only on the questions it was tuned on shows.

Data: ../shared/datasets/2wiki and ../shared/datasets/musique (see their README.md), indexed first
with bench/twowiki.py into cairn_bench_2wiki and cairn_bench_musique.
Takes: about 2 minutes for 2Wiki's 500 questions and 1 for MuSiQue's 149 once indexed.

Reproduce:  .venv/bin/python bench/multihop_answers.py
            .venv/bin/python bench/multihop_answers.py --dataset ../shared/datasets/musique --database cairn_bench_musique
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--database", default="cairn_bench_2wiki")
    parser.add_argument("--queries", type=int, default=None, help="only the first N questions")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each question the answer misses")
    parser.add_argument("--dump", type=Path, default=None, help="write each question's answer as JSON lines")
    args = parser.parse_args()
    os.environ["CAIRN_EMBEDDED_DATABASE"] = args.database

    import django

    django.setup()
    from permissions.models import Team, User
    from rag.answering.answer import answer_complete, answer_request

    team = Team.objects.get(name="2Wiki")  # the team bench/twowiki.py indexes into, whatever the dataset
    user = User.objects.get(team=team, username="2wiki-reader")
    questions = [json.loads(line) for line in (args.dataset / "queries.train.jsonl").open()]
    questions = sorted(questions, key=lambda q: q["_id"])[: args.queries]
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    totals: dict[str, Counter] = defaultdict(Counter)
    reliability: dict[tuple[str, str], Counter] = defaultdict(Counter)
    dump = args.dump.open("w") if args.dump else None
    for q in questions:
        gold = [q["answer"], *q.get("answer_aliases", [])]
        record = answer_complete(answer_request(user=user, query=q["text"], keep=False, fresh=True))
        cited = "\n".join(c["context"] for c in record.citations)
        right = contains(record.answer, gold)
        row = {"in answer": right, "in cited": contains(cited, gold)}
        for part in ("all", half(q["_id"])):
            totals[part]["questions"] += 1
            totals[part].update(k for k, v in row.items() if v)
            reliability[(part, record.confidence)]["count"] += 1
            reliability[(part, record.confidence)]["right"] += right
        if args.verbose and not right:
            print(f"  MISS {q['text']} -> {q['answer']!r}\n    {record.answer[:600]!r}")
        if dump:
            dump.write(
                json.dumps(
                    {
                        "id": q["_id"],
                        "question": q["text"],
                        "gold": gold,
                        **row,
                        "confidence": record.confidence,
                        "answer": record.answer,
                        "cited": [c["document"]["title"] for c in record.citations],
                    }
                )
                + "\n"
            )
    print(f"dataset: {args.dataset.name}, {len(questions)} questions")
    print("| questions | n | gold in answer | gold in cited passages |")
    print("|---|---|---|---|")
    for part in ("tune", "held-out", "all"):
        t = totals[part]
        n = max(1, t["questions"])
        print(f"| {part} | {t['questions']} | {t['in answer'] / n:.3f} | {t['in cited'] / n:.3f} |")
    print("| questions | level | count | share of answers | right (gold in answer) |")
    print("|---|---|---|---|---|")
    for part in ("tune", "held-out", "all"):
        n = max(1, totals[part]["questions"])
        for level in LEVELS:
            c = reliability[(part, level)]
            share = f"{c['right'] / c['count']:.3f}" if c["count"] else "-"
            print(f"| {part} | {level} | {c['count']} | {c['count'] / n:.3f} | {share} |")


if __name__ == "__main__":
    main()
