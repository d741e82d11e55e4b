"""manage.py import_path: a folder in, unchanged files skipped, changed files a new version, gone files pruned."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Protocol

import pytest
from django.core.management import CommandError, call_command
from pytest_django import DjangoCaptureOnCommitCallbacks

from documents.ingestion import jobs as import_jobs
from documents.models import Document, ImportJob, Source
from rag.providers.embeddings import get_embedding_provider
from tests.conftest import Cast
from tests.documents.ingestion.files import HTML, MARKDOWN, make_docx, make_pdf


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guides").mkdir(parents=True)
    (root / "onboarding.md").write_text(MARKDOWN)
    (root / "guides" / "handbook.html").write_text(HTML)
    (root / "guides" / "runbook.docx").write_bytes(make_docx())
    (root / "report.pdf").write_bytes(make_pdf([["Quarterly report"], ["Second page"]]))
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]")
    return root


class ImportPath(Protocol):
    """The `import_path` fixture: run the command on `root` into the cast's handbook; its stdout and stderr."""

    def __call__(self, root: Path, *args: str) -> tuple[str, str]: ...


@pytest.fixture
def import_path(cast: Cast, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> ImportPath:
    def run(root: Path, *args: str) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command("import_path", str(root), "--collection", str(cast.handbook.pk), *args, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    return run


def embedding_calls() -> int:
    return len(get_embedding_provider().calls)  # type: ignore[attr-defined]


def titles() -> list[str]:
    return sorted(Document.objects.filter(archived_at__isnull=True).values_list("title", flat=True))


def test_it_imports_every_file_of_the_folder_recursively(folder: Path, import_path: ImportPath) -> None:
    out, _ = import_path(folder)
    assert out.startswith("4 files: 4 created, 0 updated, 0 unchanged, 0 failed; 0 documents were archived.")
    assert titles() == ["Deployment runbook", "Incident handbook", "Onboarding", "Quarterly report"]
    assert set(Source.objects.values_list("path", flat=True)) == {
        "onboarding.md",
        "guides/handbook.html",
        "guides/runbook.docx",
        "report.pdf",
    }
    assert all(d.published_at is not None for d in Document.objects.all())


def test_a_second_run_on_an_unchanged_folder_parses_and_embeds_nothing(
    folder: Path, import_path: ImportPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_path(folder)
    calls = embedding_calls()
    monkeypatch.setattr(import_jobs, "parse", lambda *a: pytest.fail("an unchanged file was parsed"))
    out, _ = import_path(folder)
    assert out.startswith("4 files: 0 created, 0 updated, 4 unchanged, 0 failed")
    assert embedding_calls() == calls
    assert set(Document.objects.values_list("version", flat=True)) == {1}


def test_a_changed_file_becomes_a_new_version_of_the_same_document(folder: Path, import_path: ImportPath) -> None:
    import_path(folder)
    (folder / "onboarding.md").write_text(MARKDOWN + "\nBring your laptop on day one.\n")
    out, _ = import_path(folder)
    assert "1 updated, 3 unchanged" in out
    document = Document.objects.get(title="Onboarding")
    assert (document.version, document.text.endswith("Bring your laptop on day one.\n")) == (2, True)
    assert Document.objects.count() == 4


def test_prune_archives_the_documents_whose_files_are_gone(folder: Path, import_path: ImportPath) -> None:
    import_path(folder)
    (folder / "report.pdf").unlink()
    import_path(folder)
    assert "Quarterly report" in titles()  # without --prune, nothing is archived
    out, _ = import_path(folder, "--prune")
    assert "1 documents were archived" in out
    assert "Quarterly report" not in titles()
    assert Document.objects.get(title="Quarterly report").archived_at is not None


def test_a_pruned_file_that_comes_back_brings_its_document_back(folder: Path, import_path: ImportPath) -> None:
    import_path(folder)
    pdf = (folder / "report.pdf").read_bytes()
    (folder / "report.pdf").unlink()
    import_path(folder, "--prune")
    (folder / "report.pdf").write_bytes(pdf)
    import_path(folder, "--prune")
    assert "Quarterly report" in titles()


def test_prune_with_a_glob_archives_only_within_the_glob(folder: Path, import_path: ImportPath) -> None:
    import_path(folder)
    (folder / "report.pdf").unlink()
    (folder / "onboarding.md").unlink()
    out, _ = import_path(folder, "--prune", "--glob", "*.md")
    assert "1 documents were archived" in out
    assert "Onboarding" not in titles() and "Quarterly report" in titles()


def test_a_dry_run_reports_and_changes_nothing(folder: Path, import_path: ImportPath) -> None:
    out, _ = import_path(folder, "--dry-run")
    assert out.startswith("4 files: 4 created, 0 updated, 0 unchanged, 0 failed; 0 documents would be archived.")
    assert (Document.objects.count(), ImportJob.objects.count(), Source.objects.count()) == (0, 0, 0)


def test_a_glob_picks_the_files(folder: Path, import_path: ImportPath) -> None:
    out, _ = import_path(folder, "--glob", "guides/*")
    assert out.startswith("2 files: 2 created")
    assert titles() == ["Deployment runbook", "Incident handbook"]


def test_a_symbolic_link_is_not_followed(folder: Path, import_path: ImportPath, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Outside the folder")
    (folder / "link.md").symlink_to(secret)
    (folder / "linked-dir").symlink_to(tmp_path)
    out, err = import_path(folder)
    assert "2 failed" in out
    assert "link.md: Symbolic links are not followed." in err
    assert "linked-dir: Symbolic links are not followed." in err
    assert "Outside the folder" not in titles()


def test_bad_files_fail_alone_with_their_reason(folder: Path, import_path: ImportPath) -> None:
    (folder / "empty.md").write_bytes(b"")
    (folder / "scan.pdf").write_bytes(make_pdf([[]]))
    out, err = import_path(folder)
    assert "4 created, 0 updated, 0 unchanged, 2 failed" in out
    assert "empty.md: The file is empty." in err
    assert "scan.pdf: The PDF has no extractable text" in err


def test_drafts_need_a_user_who_may_write(cast: Cast, folder: Path, import_path: ImportPath) -> None:
    with pytest.raises(CommandError, match="--draft needs --user"):
        import_path(folder, "--draft")
    with pytest.raises(CommandError, match="bob may not add documents to Handbook"):
        import_path(folder, "--user", "bob")
    import_path(folder, "--user", "alice", "--draft")
    assert {(d.created_by, d.published_at) for d in Document.objects.all()} == {(cast.alice, None)}


def test_a_missing_folder_or_collection_is_a_clear_error(folder: Path, cast: Cast) -> None:
    with pytest.raises(CommandError, match="is not a directory"):
        call_command("import_path", str(folder / "nope"), "--collection", str(cast.handbook.pk))
    with pytest.raises(CommandError, match="No collection with id nope"):
        call_command("import_path", str(folder), "--collection", "nope")


def test_a_zip_archive_in_the_folder_is_expanded_whatever_its_name(folder: Path, import_path: ImportPath) -> None:
    from tests.documents.ingestion.files import make_zip

    (folder / "export.bin").write_bytes(make_zip({"wiki/faq.md": b"# FAQ\n\nAsk away."}))
    (folder / "runbook-copy.zip.docx").write_bytes(make_docx())
    out, _ = import_path(folder)
    assert out.startswith("6 files: 6 created")
    assert Source.objects.filter(path="export.bin/wiki/faq.md").exists()
    assert Source.objects.get(path="runbook-copy.zip.docx").format == "docx"


def test_the_progress_bar_redraws_one_line_on_a_terminal() -> None:
    from documents.management.commands.import_path import ProgressBar

    out = io.StringIO()
    bar = ProgressBar(out, total=4, enabled=True)
    job = ImportJob(files_done=4, files_failed=1)
    bar(job)
    assert out.getvalue() == "\r[##############################] 4/4 files, 1 failed\n"
    quiet = io.StringIO()
    ProgressBar(quiet, total=4, enabled=False)(job)
    assert quiet.getvalue() == ""
