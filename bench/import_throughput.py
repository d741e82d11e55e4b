"""Import throughput: a 1,000-file Markdown import end to end against the indexing pipeline's own rate, same run.

End to end is what a user waits for: the files uploaded as one ZIP to `documents.import` on the server
`make run` runs (`python -m config.serve`: gunicorn, a Celery worker and beat, the local MiniLM encoder),
from the request's start until `jobs.info` says `done` (every chunk of every file indexed, so searchable).
Its rate is the chunks the job's documents hold over that time. The pipeline's own rate is then taken in
the same run on exactly those documents, after the server has stopped: their chunks dropped, and indexed
again in process by the indexing service (rag.indexing.pipeline.index_documents, 64 documents a call), as
bench/scifact.py times it. The ratio of the two is what the import path costs on top of the pipeline: parsing,
queueing, task overheads, the workers sharing the cores. A searched sentence from the last file checks
that the import's chunks answer.

Data: 1,000 Markdown files written by the script from SciFact's abstracts (two abstracts a file under a
heading each, so a file is a few chunks), by default from ../shared/datasets/scifact beside the repository
(`--dataset`, or SCIFACT_DIR); its own embedded database `cairn_bench_import`, emptied at each run.
Takes: on 2 vCPUs about 3 to 5 minutes a run (two indexings of about 3,000 chunks).

With `--edit-every S`, a one-document edit is also made every S seconds while the import runs, and timed until a
keyword search finds it: what a person editing waits for while someone imports (one worker serving both queues,
as `make run`'s).

Reproduce:  .venv/bin/python bench/import_throughput.py [--files 1000] [--runs 3]
            .venv/bin/python bench/import_throughput.py --edit-every 10
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import threading
import time
import zipfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answer_cache import stop_serve  # noqa: E402  (bench/: stops config.serve as Ctrl-C would)
from latency import free_port, quiet_http_logs, setup_django, start_server, wait_for_reconciliation  # noqa: E402
from scifact import DATASET  # noqa: E402

DATABASE = "cairn_bench_import"
RUN_DIR = ROOT / "var" / "bench-import-run"


def markdown_files(dataset: Path, files: int) -> dict[str, bytes]:
    """`files` Markdown files of two SciFact abstracts each, under a folder per hundred (as an export would be)."""
    corpus = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
    out = {}
    for n in range(files):
        first, second = corpus[(2 * n) % len(corpus)], corpus[(2 * n + 1) % len(corpus)]
        body = f"# {first['title']}\n\n{first['text']}\n\n## {second['title']}\n\n{second['text']}\n"
        out[f"papers-{n // 100:02d}/paper-{n:04d}.md"] = body.encode()
    return out


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return buffer.getvalue()


def fresh_team():
    """An empty database but for one team, its owner, a collection and a write token."""
    from django.core.management import call_command
    from django.db import connection

    from documents.models import Collection
    from permissions.models import Access, Team, TeamRole, TokenScope, User
    from permissions.services import api_token_create

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE permissions_team CASCADE")
    team = Team.objects.create(name="Import bench")
    owner = User.objects.create(username=f"importer-{time.time_ns()}", team=team, role=TeamRole.ADMIN)
    collection = Collection.objects.create(team=team, name="Papers", default_access=Access.READ_WRITE)
    token = api_token_create(user=owner, scope=TokenScope.WRITE, name="import bench").plaintext
    return team, collection, token


def edits_while_importing(client: httpx.Client, collection_id: str, every: float, job_done: threading.Event) -> list[float]:
    """Every `every` seconds until the job is done: a new one-document edit, and the seconds until a keyword search
    finds its word (what a person editing during someone's import waits for)."""
    waits = []
    n = 0
    while not job_done.wait(every):
        n += 1
        word = f"zyxedit{n}q{time.time_ns() % 10**6}"
        started = time.perf_counter()
        created = client.post(
            "/documents.create",
            json={"title": f"Edit {n}", "text": f"# Edit {n}\n\nThe {word} note.", "collectionId": collection_id},
        )
        if created.status_code != 200:
            raise SystemExit(f"documents.create answered {created.status_code}: {created.text[:300]}")
        while time.perf_counter() - started < 120:
            if client.post("/rag.search", json={"query": word, "limit": 1, "mode": "keyword"}).json().get("data"):
                waits.append(time.perf_counter() - started)
                break
            time.sleep(0.1)
        else:
            waits.append(float("inf"))
    return waits


def import_end_to_end(
    archive: bytes,
    files: int,
    collection_id: str,
    token: str,
    search_for: str,
    server_env: dict[str, str],
    edit_every: float = 0,
) -> dict:
    """Start the server, upload, poll the job until done; the seconds, the chunks and how the job's counts moved."""
    port = free_port()
    process = start_server(DATABASE, port, {"LOG_LEVEL": "INFO", **server_env}, run_dir=RUN_DIR)
    try:
        wait_for_reconciliation(process, run_dir=RUN_DIR)
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}/api", headers={"Authorization": f"Bearer {token}"}, timeout=120)
        started = time.perf_counter()
        response = client.post(
            "/documents.import",
            data={"collectionId": collection_id, "publish": "true"},
            files={"files": ("papers.zip", archive, "application/zip")},
        )
        if response.status_code != 200:
            raise SystemExit(f"documents.import answered {response.status_code}: {response.text[:500]}")
        job_id = response.json()["data"]["id"]
        uploaded = time.perf_counter() - started
        job_done, edit_waits = threading.Event(), []
        if edit_every:
            editor = httpx.Client(
                base_url=f"http://127.0.0.1:{port}/api", headers={"Authorization": f"Bearer {token}"}, timeout=120
            )
            probe = threading.Thread(
                target=lambda: edit_waits.extend(edits_while_importing(editor, collection_id, edit_every, job_done))
            )
            probe.start()
        last_print, job = 0.0, {}
        while True:
            job = client.post("/jobs.info", json={"id": job_id}).json()["data"]
            if job["stage"] in ("done", "failed"):
                break
            now = time.perf_counter()
            if now - last_print > 15:
                last_print = now
                print(
                    f"    {now - started:5.0f} s: {job['stage']}, files {job['filesDone']}/{job['filesTotal']}, "
                    f"chunks {job['chunksEmbedded']}/{job['chunksTotal']}, ETA {job['etaSeconds']} s",
                    flush=True,
                )
            time.sleep(0.25)
        took = time.perf_counter() - started
        job_done.set()
        if edit_every:
            probe.join()
        if job["stage"] != "done" or job["filesDone"] != files or job["filesFailed"]:
            raise SystemExit(f"the import did not complete: {json.dumps({k: v for k, v in job.items() if k != 'files'})}")
        hits = client.post("/rag.search", json={"query": search_for, "limit": 3, "mode": "keyword"}).json()["data"]
        if not hits:
            raise SystemExit(f"the last file's sentence found nothing after the job was done: {search_for!r}")
    finally:
        stop_serve(process)
    return {"seconds": took, "upload_seconds": uploaded, "edit_waits": edit_waits}


def pipeline_again(team) -> tuple[int, float]:
    """The same documents' chunks dropped and indexed again in process: (chunks, seconds)."""
    from rag.indexing.pipeline import index_documents
    from rag.models import Chunk, IndexStatus
    from rag.providers.embeddings import get_embedding_provider

    provider = get_embedding_provider()
    ids = list(IndexStatus.objects.filter(document__team=team).order_by("document_id").values_list("document_id", flat=True))
    Chunk.objects.filter(team=team).delete()
    IndexStatus.objects.filter(document__team=team).delete()
    provider.embed(["warm up the model"] * 4)
    started = time.perf_counter()
    chunks = 0
    for i in range(0, len(ids), 64):
        chunks += index_documents(document_ids=ids[i : i + 64], provider=provider).chunks
    return chunks, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATASET, help="BEIR SciFact's folder (default: %(default)s)")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--server-env", nargs="*", default=[], metavar="NAME=VALUE", help="settings for the server only (a variant to compare)"
    )
    parser.add_argument(
        "--edit-every",
        type=float,
        default=0,
        help="also create a one-document edit every this many seconds during the import and time until it is found "
        "(its chunks then count in the import's; compare throughput from runs without it)",
    )
    args = parser.parse_args()
    server_env = dict(item.split("=", 1) for item in args.server_env)
    setup_django(DATABASE)
    quiet_http_logs()
    from rag.models import Chunk

    files = markdown_files(args.dataset, args.files)
    archive = zipped(files)
    last_sentence = list(files.values())[-1].decode().rstrip().rsplit("\n", 1)[-1].split(". ")[0]
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"{len(files)} Markdown files, {sum(map(len, files.values())) / 1e6:.1f} MB ({len(archive) / 1e6:.1f} MB zipped)")
    ratios, e2e_rates, pipeline_rates = [], [], []
    for run in range(1, args.runs + 1):
        team, collection, token = fresh_team()
        e2e = import_end_to_end(archive, len(files), str(collection.pk), token, last_sentence, server_env, args.edit_every)
        chunks = Chunk.objects.filter(team=team).count()
        again, seconds = pipeline_again(team)
        if again != chunks:
            raise SystemExit(f"the pipeline wrote {again} chunks where the import wrote {chunks}")
        e2e_rate, pipeline_rate = chunks / e2e["seconds"], again / seconds
        e2e_rates.append(e2e_rate)
        pipeline_rates.append(pipeline_rate)
        ratios.append(e2e_rate / pipeline_rate)
        print(
            f"run {run}: import {chunks} chunks in {e2e['seconds']:.1f} s (upload {e2e['upload_seconds']:.2f} s) = "
            f"{e2e_rate:.2f} chunks/s; the pipeline in process {seconds:.1f} s = {pipeline_rate:.2f} chunks/s; "
            f"ratio {ratios[-1]:.3f}",
            flush=True,
        )
        if waits := sorted(e2e["edit_waits"]):
            print(
                f"  {len(waits)} edits during the import: searchable after p50 {statistics.median(waits):.2f} s, "
                f"max {waits[-1]:.2f} s; {sum(w <= 5 for w in waits)} within 5 s",
                flush=True,
            )
    print(
        f"median of {len(ratios)}: import {statistics.median(e2e_rates):.2f} chunks/s, pipeline "
        f"{statistics.median(pipeline_rates):.2f} chunks/s, ratio {statistics.median(ratios):.3f} "
        f"(runs {', '.join(f'{r:.3f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main()
