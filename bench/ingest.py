"""Ingestion: parse throughput per format, and a no-op re-import of a 1,000-file folder.

1. Parse throughput: what the worker does per file before any database write or embedding —
   type detection from the bytes, then the format's parser — over generated files of each
   format (Markdown, plain text, HTML rendered from the same Markdown with page furniture around
   it, PDF, DOCX). Reported in MB of input per second and files per second; pages per second for
   PDF. One process, one core.
2. No-op re-import: `manage.py import_path` of a folder of 1,000 Markdown files (about 4 KB each)
   into a collection that already holds them. Every file is read and hashed, none is parsed or
   embedded. Timed in-process (the import itself) and as the whole command in a new process
   (Python and Django start-up included). Target: under 10 s. The first import, which does parse
   and index, runs with the fake embedding provider (it is set-up, not measured), in its own
   database `cairn_bench_ingest` on the embedded server.

Reproduce:  .venv/bin/python bench/ingest.py [--files 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE = "cairn_bench_ingest"
FOLDER = ROOT / "var" / "bench-ingest"
ENV = {
    "CAIRN_EMBEDDED_DATABASE": DATABASE,
    "DJANGO_SETTINGS_MODULE": "config.settings.local",
    "RAG_EMBEDDING_PROVIDER": "fake",
    "RAG_EMBEDDING_MODEL": "fake-embedding",
    "IMPORT_STORAGE_DIR": str(ROOT / "var" / "bench-ingest-storage"),
    "CELERY_BROKER_URL": "",
    "LOG_LEVEL": "WARNING",
}

WORDS = (
    "deploy service rollback incident owner schedule budget review access token cluster queue retry "
    "latency storage backup restore policy team handbook release feature customer support contract"
).split()


def paragraph(seed: int, words: int = 60) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13) % len(WORDS)] for i in range(words)).capitalize() + "."


def markdown_document(seed: int, sections: int = 12) -> str:
    parts = [f"# Document {seed}\n"]
    for s in range(sections):
        parts.append(f"## Section {s}\n\n{paragraph(seed + s)}\n\n{paragraph(seed + s + 1)}\n")
        if s % 4 == 1:
            parts.append("| key | value |\n| --- | --- |\n" + "".join(f"| k{r} | {WORDS[r]} |\n" for r in range(6)))
        if s % 4 == 3:
            parts.append("```python\nfor item in queue:\n    retry(item, attempts=3)\n```\n")
    return "\n".join(parts)


def html_document(seed: int) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown_document(seed))
    return (
        f"<!DOCTYPE html><html><head><title>Document {seed}</title><style>body{{margin:0}}</style>"
        "<script>window.analytics = [];</script></head><body><nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav>"
        f"<main>{body}</main><footer>Copyright</footer></body></html>"
    )


def docx_document(seed: int) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading(f"Document {seed}", level=1)
    for s in range(12):
        document.add_heading(f"Section {s}", level=2)
        document.add_paragraph(paragraph(seed + s))
        document.add_paragraph(paragraph(seed + s + 1))
        if s % 4 == 1:
            table = document.add_table(rows=6, cols=2)
            for r, row in enumerate(table.rows):
                row.cells[0].text, row.cells[1].text = f"k{r}", WORDS[r]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pdf_document(seed: int, pages: int) -> bytes:
    from tests.documents.ingestion.files import make_pdf

    return make_pdf([[paragraph(seed + p * 50 + line, 12) for line in range(45)] for p in range(pages)])


def corpora(count: int) -> dict[str, tuple[str, list[bytes]]]:
    """Per format: a file name and `count` files (PDFs: `count // 4` files of 20 pages)."""
    return {
        "markdown": ("doc.md", [markdown_document(i).encode() for i in range(count)]),
        "text": ("doc.txt", [markdown_document(i).encode() for i in range(count)]),
        "html": ("doc.html", [html_document(i).encode() for i in range(count)]),
        "pdf": ("doc.pdf", [pdf_document(i, 20) for i in range(max(1, count // 4))]),
        "docx": ("doc.docx", [docx_document(i) for i in range(max(1, count // 4))]),
    }


def measure_parsing(count: int, rounds: int) -> None:
    from documents.ingestion.detect import detect
    from documents.ingestion.parsers import parse

    print(f"Parse throughput (detect + parse, one core, best of {rounds} rounds)")
    print(f"{'format':<10}{'files':>7}{'MB':>9}{'seconds':>10}{'MB/s':>9}{'files/s':>10}{'pages/s':>10}")
    for fmt, (name, files) in corpora(count).items():
        size = sum(len(f) for f in files)
        best, pages = float("inf"), 0
        for _ in range(rounds):
            started = time.perf_counter()
            pages = 0
            for data in files:
                parsed = parse(name, data, detect(name, data))
                pages += parsed.pages
            best = min(best, time.perf_counter() - started)
        per_page = f"{pages / best:10.1f}" if pages else f"{'':>10}"
        print(
            f"{fmt:<10}{len(files):>7}{size / 1e6:>9.2f}{best:>10.3f}{size / 1e6 / best:>9.2f}{len(files) / best:>10.1f}{per_page}"
        )


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure_noop_reimport(files: int) -> None:
    os.environ.update(ENV)
    import django

    django.setup()
    from django.core.management import call_command

    from documents.models import Collection, Document, Source
    from permissions.models import Access, Team

    call_command("migrate", verbosity=0)
    FOLDER.mkdir(parents=True, exist_ok=True)
    for old in FOLDER.glob("**/*.md"):
        old.unlink()
    for i in range(files):
        sub = FOLDER / f"area-{i % 10}"
        sub.mkdir(exist_ok=True)
        (sub / f"note-{i:04d}.md").write_text(markdown_document(i, sections=3))
    drop_team()
    team = Team.objects.create(name="Ingest bench")
    collection = Collection.objects.create(team=team, name="Bench", default_access=Access.READ_WRITE)
    quiet = io.StringIO()
    first = timed(lambda: call_command("import_path", str(FOLDER), "--collection", str(collection.pk), stdout=quiet))
    assert Source.objects.filter(collection=collection).count() == files, quiet.getvalue()
    second = timed(lambda: call_command("import_path", str(FOLDER), "--collection", str(collection.pk), stdout=quiet))
    command = [sys.executable, "manage.py", "import_path", str(FOLDER), "--collection", str(collection.pk)]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, text=True, check=True)
    whole = time.perf_counter() - started
    print(f"\nNo-op re-import of {files} Markdown files ({sum(f.stat().st_size for f in FOLDER.glob('**/*.md')) / 1e6:.1f} MB)")
    print(f"  first import (parse, write, index with the fake provider): {first:.2f} s")
    print(f"  re-import, in process:                                     {second:.2f} s")
    print(f"  re-import, `manage.py import_path` in a new process:       {whole:.2f} s   (target < 10 s)")
    print(f"  its report: {result.stdout.strip().splitlines()[0]}")
    assert Document.objects.filter(team=team, version__gt=1).count() == 0
    drop_team()


def drop_team() -> None:
    """The bench's team and everything in it (documents first: collections protect them)."""
    from documents.models import Document
    from permissions.models import Team

    for team in Team.objects.filter(name="Ingest bench"):
        Document.objects.filter(team=team).delete()
        team.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000, help="files in the re-imported folder")
    parser.add_argument("--parse-files", type=int, default=200, help="files per format for the parse throughput")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    measure_parsing(args.parse_files, args.rounds)
    measure_noop_reimport(args.files)


if __name__ == "__main__":
    main()
