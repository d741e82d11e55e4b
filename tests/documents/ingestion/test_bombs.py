"""Bombs end as one file's error, within a worker's memory, and the next file of the job is imported.

Each job runs as a worker runs it, in a child process whose address space is limited (RLIMIT_AS) to
what it had after start-up plus WORKER_HEADROOM: a bomb that got through would meet a MemoryError
there, never the host's out-of-memory killer. The child's resident set must also stay within
RSS_BOUND of where it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.ingestion.jobs import import_job_create
from documents.models import ImportJob
from tests.conftest import Cast
from tests.documents.ingestion.files import make_docx_bomb, make_ratio_bomb_archive, make_yaml_bomb
from tests.servers import ROOT, database_env

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
WORKER_HEADROOM = 768 * MB
RSS_BOUND = 128 * MB
NEXT = ("next.md", b"# Next\n\nThe file after the bomb.\n")


def run_bounded(cast: Cast, import_storage: Path, files: list[tuple[str, bytes]]) -> tuple[dict[str, tuple[str, str]], int]:
    """Import `files` in a bounded child process: each path's (outcome, reason), and how far the child's RSS grew."""
    job = import_job_create(
        by=cast.alice,
        collection=cast.handbook,
        origin="bombs",
        publish=True,
        uploads=[SimpleUploadedFile(name, data) for name, data in files],
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        **database_env(),
        "IMPORT_STORAGE_DIR": str(import_storage),
        "RAG_EMBEDDING_PROVIDER": "fake",
        "RAG_EMBEDDING_MODEL": "fake-embedding",
        "RAG_EMBEDDING_DIMENSION": "384",
    }
    child = subprocess.run(
        [sys.executable, "-m", "tests.documents.ingestion.bounded_import", str(job.pk), str(WORKER_HEADROOM)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    rows = ImportJob.objects.get(pk=job.pk).files.values_list("path", "outcome", "error")
    return {path: (outcome, error) for path, outcome, error in rows}, json.loads(child.stdout.splitlines()[-1])["rss_growth"]


def test_a_yaml_alias_bomb_fails_alone_and_the_next_file_is_imported(cast: Cast, import_storage: Path) -> None:
    files, rss_growth = run_bounded(cast, import_storage, [("laughs.md", make_yaml_bomb(levels=10)), NEXT])
    assert files["laughs.md"] == (
        "failed",
        "The front matter (between the --- lines at the top) repeats a value with a YAML alias (*name); "
        "aliases are not allowed there.",
    )
    assert files["next.md"] == ("created", "")
    assert rss_growth < RSS_BOUND


def test_a_hundred_ratio_bomb_archives_fail_entry_by_entry_and_the_next_file_is_imported(
    cast: Cast, import_storage: Path
) -> None:
    archive = make_ratio_bomb_archive(entries=10)  # 10 KB, 10 MB expanded; a hundred of them: 1 GB
    files, rss_growth = run_bounded(cast, import_storage, [*((f"bomb-{n}.zip", archive) for n in range(100)), NEXT])
    reasons = {reason for path, (outcome, reason) in files.items() if path != "next.md"}
    assert len(files) == 100 * 10 + 1
    assert reasons == {"The file expands more than 100 times its compressed size (a ZIP bomb?)."}
    assert files["next.md"] == ("created", "")
    assert rss_growth < RSS_BOUND


def test_a_20_mb_docx_bomb_fails_alone_and_the_next_file_is_imported(cast: Cast, import_storage: Path) -> None:
    bomb = make_docx_bomb(size=19 * MB)  # word/document.xml declares and inflates to 4 GB
    files, rss_growth = run_bounded(cast, import_storage, [("bomb.docx", bomb), NEXT])
    assert files["bomb.docx"] == ("failed", "The DOCX expands beyond the 32 MB limit for one DOCX (its parts together).")
    assert files["next.md"] == ("created", "")
    assert rss_growth < RSS_BOUND
