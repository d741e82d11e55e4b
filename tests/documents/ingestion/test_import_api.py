"""documents.import, jobs.info and jobs.list: files become documents on the worker, each failing alone."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from pytest_django import Settings

from documents.ingestion import jobs as import_jobs
from documents.models import Document, ImportJob, Source
from permissions.models import TeamRole
from rag.providers.embeddings import get_embedding_provider
from tests.conftest import ApiFor, Cast
from tests.documents.ingestion.conftest import JobInfo, Upload, outcomes, reasons
from tests.documents.ingestion.files import HTML, MARKDOWN, encrypt_pdf, make_docx, make_pdf, make_zip
from tests.factories import UserFactory


def embedded_texts() -> list[str]:
    return [text for batch in get_embedding_provider().calls for text in batch]  # type: ignore[attr-defined]


def test_an_upload_becomes_documents_with_their_sources_and_is_indexed(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    response = upload(cast.alice, cast.handbook, {"onboarding.md": MARKDOWN.encode(), "handbook.html": HTML.encode()})
    job = job_info(cast.alice, response["data"]["id"])
    assert (job["stage"], job["filesTotal"], job["filesDone"], job["filesFailed"]) == ("done", 2, 2, 0)
    assert outcomes(job) == {"onboarding.md": "created", "handbook.html": "created"}
    document = Document.objects.get(title="Onboarding")
    assert (document.collection, document.created_by, document.published_at is not None) == (cast.handbook, cast.alice, True)
    source = Source.objects.get(document=document)
    assert (source.path, source.format, source.size, source.document_version) == ("onboarding.md", "markdown", len(MARKDOWN), 1)
    assert any("Welcome to the team." in text for text in embedded_texts())


def test_the_response_is_the_queued_job_and_parsing_waits_for_the_commit(
    cast: Cast, api_for: ApiFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = []
    monkeypatch.setattr(import_jobs, "parse", lambda *a: parsed.append(a))
    from django.core.files.uploadedfile import SimpleUploadedFile

    body = {"collectionId": str(cast.handbook.pk), "files": [SimpleUploadedFile("a.md", b"# A")]}
    response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
    assert response.status_code == 200
    assert (response.json()["data"]["stage"], parsed) == ("queued", [])


def test_documents_info_shows_the_source(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    upload(cast.alice, cast.handbook, {"report.pdf": make_pdf([["Page one"], ["Page two"]])})
    document = Document.objects.get(title="Page one")
    source = api_for(cast.alice).post("documents.info", {"id": str(document.pk)}).json()["data"]["source"]
    assert {k: source[k] for k in ("filename", "path", "format", "version", "pages")} == {
        "filename": "report.pdf",
        "path": "report.pdf",
        "format": "pdf",
        "version": 1,
        "pages": 2,
    }
    assert source["originalUrl"] == f"/doc/{document.pk}/original?v=1"


def test_a_document_written_in_cairn_has_no_source(cast: Cast, api_for: ApiFor) -> None:
    created = api_for(cast.alice).post("documents.create", {"title": "T", "text": "x", "collectionId": str(cast.handbook.pk)})
    info = api_for(cast.alice).post("documents.info", {"id": created.json()["data"]["id"]}).json()["data"]
    assert info["source"] is None


def test_reimporting_an_unchanged_file_parses_and_embeds_nothing(
    cast: Cast, upload: Upload, job_info: JobInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(cast.alice, cast.handbook, {"onboarding.md": MARKDOWN.encode()})
    document = Document.objects.get(title="Onboarding")
    embedded_before = len(embedded_texts())
    monkeypatch.setattr(import_jobs, "parse", lambda *a: pytest.fail("an unchanged file was parsed"))
    job = job_info(cast.alice, upload(cast.alice, cast.handbook, {"onboarding.md": MARKDOWN.encode()})["data"]["id"])
    assert (outcomes(job), job["stage"]) == ({"onboarding.md": "unchanged"}, "done")
    assert len(embedded_texts()) == embedded_before
    document.refresh_from_db()
    assert document.version == 1


def test_a_changed_file_becomes_a_new_version_of_the_same_document(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    upload(cast.alice, cast.handbook, {"onboarding.md": MARKDOWN.encode()})
    changed = MARKDOWN.replace("Welcome to the team.", "Welcome aboard, new colleague.")
    job = job_info(cast.alice, upload(cast.alice, cast.handbook, {"onboarding.md": changed.encode()})["data"]["id"])
    assert outcomes(job) == {"onboarding.md": "updated"}
    document = Document.objects.get(title="Onboarding")
    assert (document.version, "Welcome aboard" in document.text) == (2, True)
    assert list(
        Source.objects.filter(document=document).order_by("document_version").values_list("document_version", flat=True)
    ) == [
        1,
        2,
    ]
    assert any("Welcome aboard" in text for text in embedded_texts())


def test_a_zip_archive_is_expanded_with_its_folders_as_path_prefixes(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    archive = make_zip({"guides/runbook.docx": make_docx(), "guides/handbook.html": HTML.encode(), "README.md": b"# Docs"})
    job = job_info(cast.alice, upload(cast.alice, cast.handbook, {"docs.zip": archive})["data"]["id"])
    assert outcomes(job) == {
        "docs.zip/guides/runbook.docx": "created",
        "docs.zip/guides/handbook.html": "created",
        "docs.zip/README.md": "created",
    }
    assert set(Source.objects.values_list("format", flat=True)) == {"docx", "html", "markdown"}


def test_every_bad_file_fails_alone_with_its_reason_and_the_rest_is_imported(
    cast: Cast, upload: Upload, job_info: JobInfo, settings: Settings
) -> None:
    settings.IMPORT_MAX_EXPANSION_RATIO = 100
    settings.IMPORT_MAX_FILE_SIZE = 2 * 1024 * 1024
    archive = make_zip(
        {
            "../escape.md": b"# Escape",
            "/abs.md": b"# Absolute",
            "bomb.txt": b"0" * (1536 * 1024),
            "inner.zip": make_zip({"x.md": b"# x"}),
            "fine.md": b"# Fine\n\nInside the archive.",
        }
    )
    files = {
        "good.md": b"# Good\n\nThis one works.",
        "empty.md": b"",
        "photo.png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 100,
        "broken.txt": "Grüße.\n".encode() + b"\xff\xfe\n",
        "corrupt.pdf": b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>\ngarbage",
        "locked.pdf": encrypt_pdf(make_pdf([["Top secret"]])),
        "scan.pdf": make_pdf([[]]),
        "huge.md": b"# Huge\n" + b"words " * (400 * 1024),
        "docs.zip": archive,
    }
    job = job_info(cast.alice, upload(cast.alice, cast.handbook, files)["data"]["id"])
    failed = reasons(job)
    assert failed == {
        "empty.md": "The file is empty.",
        "photo.png": "Unsupported file type: a PNG image.",
        "broken.txt": "Invalid text encoding: the file is UTF-8 but byte 9 is not (invalid start byte).",
        "corrupt.pdf": failed["corrupt.pdf"],
        "locked.pdf": "The PDF is encrypted with a password; remove the password and import it again.",
        "scan.pdf": "The PDF has no extractable text (a scanned document needs OCR before it can be imported).",
        "huge.md": "The file is larger than the 2 MB limit per file.",
        "docs.zip/../escape.md": "Unsafe path in the archive: '..' would leave the archive's folder.",
        "docs.zip//abs.md": "Unsafe path in the archive: absolute paths are not allowed.",
        "docs.zip/bomb.txt": "The file expands more than 100 times its compressed size (a ZIP bomb?).",
        "docs.zip/inner.zip": "Archives inside archives are not expanded.",
    }
    assert failed["corrupt.pdf"].startswith("Corrupt PDF")
    assert outcomes(job)["good.md"] == outcomes(job)["docs.zip/fine.md"] == "created"
    assert (job["filesTotal"], job["filesFailed"], job["stage"]) == (13, 11, "done")
    assert sorted(Document.objects.values_list("title", flat=True)) == ["Fine", "Good"]


def test_a_job_whose_every_file_failed_is_failed(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    job = job_info(cast.alice, upload(cast.alice, cast.handbook, {"empty.md": b""})["data"]["id"])
    assert (job["stage"], job["error"]) == ("failed", "No file could be imported; see each file's reason.")


def test_an_upload_over_the_request_limit_is_refused_before_anything_is_stored(
    cast: Cast, upload: Upload, settings: Settings
) -> None:
    settings.IMPORT_MAX_REQUEST_SIZE = 1000
    body = upload(cast.alice, cast.handbook, {"big.md": b"x" * 2000}, status=413)
    assert body == {"error": "request_too_large", "message": "The upload is larger than the 1,000 bytes limit per request."}
    assert not ImportJob.objects.exists()


def test_an_upload_needs_files(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).client.post(
        "/api/documents.import", {"collectionId": str(cast.handbook.pk)}, format="multipart"
    )
    assert (response.status_code, response.json()["error"]) == (400, "validation_error")


def test_bob_cannot_import_into_a_collection_he_may_only_read(cast: Cast, upload: Upload) -> None:
    body = upload(cast.bob, cast.handbook, {"a.md": b"# A"}, status=403)
    assert body == {"error": "forbidden", "message": "You can read this collection but not import documents into it."}
    assert not ImportJob.objects.exists()


def test_bob_cannot_import_into_a_collection_he_cannot_see(cast: Cast, upload: Upload) -> None:
    assert upload(cast.bob, cast.private, {"a.md": b"# A"}, status=404)["error"] == "not_found"


def test_charlie_cannot_import_into_another_teams_collection(cast: Cast, upload: Upload) -> None:
    assert upload(cast.charlie, cast.handbook, {"a.md": b"# A"}, status=404)["error"] == "not_found"
    assert not Document.objects.exists()


def test_a_read_scoped_token_cannot_import(cast: Cast, upload: Upload) -> None:
    assert upload(cast.alice, cast.handbook, {"a.md": b"# A"}, scope="read", status=403)["error"] == "forbidden"


def test_a_job_is_seen_by_its_creator_and_the_team_admins_only(
    cast: Cast, upload: Upload, api_for: ApiFor, settings: Settings
) -> None:
    from permissions.models import Access

    cast.handbook.default_access = Access.READ_WRITE
    cast.handbook.save()
    job_id = upload(cast.bob, cast.handbook, {"bob.md": b"# Bob's notes"})["data"]["id"]
    alice_job = upload(cast.alice, cast.private, {"alice.md": b"# Alice's notes"})["data"]["id"]
    assert api_for(cast.alice).post("jobs.info", {"id": job_id}).status_code == 200  # a team admin
    assert api_for(cast.bob).post("jobs.info", {"id": alice_job}).status_code == 404
    assert api_for(cast.charlie).post("jobs.info", {"id": job_id}).status_code == 404
    assert [j["id"] for j in api_for(cast.bob).post("jobs.list").json()["data"]] == [job_id]
    assert {j["id"] for j in api_for(cast.alice).post("jobs.list").json()["data"]} == {job_id, alice_job}
    assert api_for(cast.charlie).post("jobs.list").json()["data"] == []


def test_a_team_admin_sees_no_job_into_a_collection_they_cannot_read(cast: Cast, upload: Upload, api_for: ApiFor) -> None:
    # The file names of an import are the collection's content: an admin of the team who cannot read
    # the collection sees neither the job nor its names; its creator still does.
    dana = UserFactory.create(team=cast.alice.team, username="dana", is_team_admin=True)
    hidden = upload(cast.alice, cast.private, {"merger-plans.md": b"# Merger plans"})["data"]["id"]
    shown = upload(cast.alice, cast.handbook, {"handbook.md": b"# Handbook"})["data"]["id"]
    assert api_for(dana).post("jobs.info", {"id": hidden}).status_code == 404
    listed = api_for(dana).post("jobs.list").json()
    assert [job["id"] for job in listed["data"]] == [shown]
    assert "merger-plans" not in str(listed)
    assert {job["id"] for job in api_for(cast.alice).post("jobs.list").json()["data"]} == {hidden, shown}


def test_a_job_stays_visible_to_its_creator_who_can_no_longer_read_its_collection(
    cast: Cast, upload: Upload, api_for: ApiFor
) -> None:
    job_id = upload(cast.alice, cast.private, {"notes.md": b"# Notes"})["data"]["id"]
    cast.private.memberships.filter(user=cast.alice).delete()
    cast.alice.role = TeamRole.MEMBER
    cast.alice.save()
    assert api_for(cast.alice).post("jobs.info", {"id": job_id}).status_code == 200


def test_a_job_links_only_the_documents_the_viewer_may_read(cast: Cast, upload: Upload, job_info: JobInfo) -> None:
    cast.alice.role = TeamRole.MEMBER
    cast.alice.save()
    job_id = upload(cast.alice, cast.handbook, {"draft.md": b"# Draft"}, publish=False)["data"]["id"]
    assert job_info(cast.alice, job_id)["files"][0]["documentId"] is not None
    cast.bob.role = TeamRole.ADMIN
    cast.bob.save()
    (entry,) = job_info(cast.bob, job_id)["files"]
    assert (entry["documentId"], entry["title"], entry["outcome"]) == (None, "", "created")


def test_the_admin_lists_jobs_with_each_files_outcome_and_the_sources(cast: Cast, upload: Upload, client: Client) -> None:
    job_id = upload(cast.alice, cast.handbook, {"good.md": b"# Good", "empty.md": b""})["data"]["id"]
    operator = type(cast.alice).objects.create_superuser("operator", password="x", team=cast.alice.team)
    client.force_login(operator)
    assert "good.md, empty.md" in client.get("/admin/documents/importjob/").content.decode()
    page = client.get(f"/admin/documents/importjob/{job_id}/change/").content.decode()
    assert "The file is empty." in page
    assert "good.md" in client.get("/admin/documents/source/").content.decode()


def test_more_files_than_a_request_may_carry_is_a_json_error(cast: Cast, api_for: ApiFor, settings: Settings) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 3
    body = {"collectionId": str(cast.handbook.pk), "files": [SimpleUploadedFile(f"{n}.md", b"# x") for n in range(4)]}
    response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
    assert (response.status_code, response.json()) == (
        400,
        {"error": "validation_error", "message": "Too many files in one request (at most 3); send a ZIP archive instead."},
    )


def test_a_job_stays_indexing_until_the_index_has_caught_up(cast: Cast, api_for: ApiFor, job_info: JobInfo) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from rag.indexing.pipeline import index_documents

    # No commit callbacks run here: the job is parsed by hand, and indexing waits until asked for.
    body = {"collectionId": str(cast.handbook.pk), "files": [SimpleUploadedFile("a.md", b"# A\n\nText.")]}
    job_id = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart").json()["data"]["id"]
    import_jobs.import_uploads(job_id=job_id)
    assert job_info(cast.alice, job_id)["stage"] == "indexing"
    assert [j["stage"] for j in api_for(cast.alice).post("jobs.list").json()["data"]] == ["indexing"]
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    done = job_info(cast.alice, job_id)
    assert (done["stage"], done["finishedAt"] is not None) == ("done", True)


def test_jobs_info_counts_the_passages_indexed_of_those_to_index_and_the_time_left(
    cast: Cast, api_for: ApiFor, job_info: JobInfo
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from rag.indexing.pipeline import index_documents
    from rag.models import IndexStatus

    def text(topic: str) -> bytes:
        paragraphs = [f"The {topic} team wrote note {n} about the way things are done here, at length." * 6 for n in range(30)]
        return (f"# {topic.title()}\n\n" + "\n\n".join(paragraphs)).encode()

    body = {
        "collectionId": str(cast.handbook.pk),
        "files": [SimpleUploadedFile(f"{topic}.md", text(topic)) for topic in ("deploys", "billing", "hiring")],
    }
    # No commit callbacks run here: the job is parsed by hand, and each document indexed when asked.
    job_id = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart").json()["data"]["id"]
    import_jobs.import_uploads(job_id=job_id)
    documents = list(Document.objects.order_by("title"))

    def progress() -> tuple[str, Any, Any, Any]:
        job = job_info(cast.alice, job_id)
        return job["stage"], job["chunksEmbedded"], job["chunksTotal"], job["etaSeconds"]

    stage, embedded, total, eta = progress()
    assert (stage, embedded, eta) == ("indexing", 0, None)
    assert total is not None and total >= 3  # estimated from the texts: nothing is cut yet
    index_documents(document_ids=[documents[0].pk])
    stage, embedded, total, eta = progress()
    first = IndexStatus.objects.get(document=documents[0]).chunk_count
    assert (stage, embedded, eta) == ("indexing", first, None)  # one document indexed tells no rate yet
    assert first > 1 and total is not None and total > embedded
    index_documents(document_ids=[documents[1].pk])
    stage, embedded, total, eta = progress()
    counted = sum(IndexStatus.objects.filter(document__in=documents[:2]).values_list("chunk_count", flat=True))
    assert (stage, embedded) == ("indexing", counted)
    assert total is not None and total > embedded and eta is not None and eta > 0
    index_documents(document_ids=[documents[2].pk])
    assert progress() == ("done", None, None, None)


def test_a_shift_jis_file_is_imported_and_deeply_nested_html_fails_with_the_nesting_limit(
    cast: Cast, upload: Upload, job_info: JobInfo
) -> None:
    notes = "# 議事録\n\n明日の予定を確認してください。東京の事務所で午後三時に会いましょう。\n"
    deep = "<html><body>" + "<div>" * 1000 + "Deep down." + "</div>" * 1000 + "</body></html>"
    job = job_info(
        cast.alice,
        upload(cast.alice, cast.handbook, {"notes.md": notes.encode("shift_jis"), "deep.html": deep.encode()})["data"]["id"],
    )
    assert outcomes(job) == {"notes.md": "created", "deep.html": "failed"}
    assert reasons(job)["deep.html"] == "The HTML is nested more than 200 elements deep; Cairn reads at most 200."
    document = Document.objects.get()
    assert (document.title, document.text) == ("議事録", notes)


def test_an_import_while_the_storage_is_unreachable_is_refused_cleanly_and_saves_nothing(
    cast: Cast, upload: Upload, settings: Settings
) -> None:
    from botocore.config import Config

    settings.STORAGES = {
        **settings.STORAGES,
        "imports": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": "cairn",
                "endpoint_url": "http://127.0.0.1:9",  # the discard port: nothing listens
                "access_key": "cairn",
                "secret_key": "not-a-real-secret",
                "client_config": Config(retries={"max_attempts": 1}, connect_timeout=2),
            },
        },
    }
    body = upload(cast.alice, cast.handbook, {"notes.md": MARKDOWN.encode()}, status=503)
    assert body["error"] == "storage_unavailable" and "nothing was imported" in body["message"]
    assert not ImportJob.objects.exists() and not Document.objects.exists()
