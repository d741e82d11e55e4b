"""The original file of an imported document: served exactly to those who may read the document."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.http import FileResponse
from django.http.response import HttpResponseBase
from django.test import Client

from documents.models import Document
from tests.conftest import ApiFor, Cast, SignIn
from tests.documents.ingestion.conftest import Upload
from tests.documents.ingestion.files import HTML, make_pdf


def original(client: Client, document: Document, query: str = "") -> HttpResponseBase:
    return client.get(f"/doc/{document.pk}/original{query}")


def file_bytes(response: HttpResponseBase) -> bytes:
    assert isinstance(response, FileResponse), response
    return response.getvalue()


def test_the_original_pdf_opens_inline_for_a_reader(cast: Cast, upload: Upload, signed_in: SignIn) -> None:
    pdf = make_pdf([["Handbook page"]])
    upload(cast.alice, cast.handbook, {"handbook.pdf": pdf})
    response = original(signed_in(cast.bob), Document.objects.get())
    assert (response.status_code, response["Content-Type"]) == (200, "application/pdf")
    assert file_bytes(response) == pdf
    assert response["Content-Disposition"].startswith("inline")


def test_an_original_html_file_is_a_download_never_a_page_of_the_site(cast: Cast, upload: Upload, signed_in: SignIn) -> None:
    upload(cast.alice, cast.handbook, {"page.html": HTML.encode()})
    response = original(signed_in(cast.alice), Document.objects.get())
    assert (response["Content-Type"], response["X-Content-Type-Options"]) == ("application/octet-stream", "nosniff")
    assert response["Content-Disposition"].startswith("attachment")
    assert "sandbox" in response["Content-Security-Policy"]


def test_bob_cannot_fetch_the_original_of_a_document_in_a_private_collection(
    cast: Cast, upload: Upload, signed_in: SignIn
) -> None:
    upload(cast.alice, cast.private, {"secret.md": b"# Secret plans"})
    assert original(signed_in(cast.bob), Document.objects.get()).status_code == 404


def test_charlie_cannot_fetch_another_teams_original(cast: Cast, upload: Upload, signed_in: SignIn) -> None:
    upload(cast.alice, cast.handbook, {"handbook.md": b"# Handbook"})
    assert original(signed_in(cast.charlie), Document.objects.get()).status_code == 404


def test_a_draft_original_is_seen_by_its_author_only(cast: Cast, upload: Upload, signed_in: SignIn, client: Client) -> None:
    upload(cast.alice, cast.handbook, {"draft.md": b"# Draft"}, publish=False)
    document = Document.objects.get()
    assert original(signed_in(cast.bob), document).status_code == 404
    client.logout()
    assert original(signed_in(cast.alice), document).status_code == 200


def test_an_original_follows_its_document_out_of_sight_when_it_is_deleted(
    cast: Cast, upload: Upload, signed_in: SignIn, api_for: ApiFor
) -> None:
    upload(cast.alice, cast.handbook, {"gone.md": b"# Gone"})
    document = Document.objects.get()
    api_for(cast.alice).post("documents.delete", {"id": str(document.pk)})
    assert original(signed_in(cast.alice), document).status_code == 404


def test_each_version_keeps_its_own_original(cast: Cast, upload: Upload, signed_in: SignIn) -> None:
    upload(cast.alice, cast.handbook, {"notes.md": b"# Notes\n\nfirst"})
    upload(cast.alice, cast.handbook, {"notes.md": b"# Notes\n\nsecond"})
    client, document = signed_in(cast.alice), Document.objects.get()
    assert file_bytes(original(client, document, "?v=1")).endswith(b"first")
    assert file_bytes(original(client, document)).endswith(b"second")


def test_a_document_written_in_cairn_has_no_original(cast: Cast, signed_in: SignIn, api_for: ApiFor) -> None:
    api_for(cast.alice).post("documents.create", {"title": "T", "text": "x", "collectionId": str(cast.handbook.pk)})
    assert original(signed_in(cast.alice), Document.objects.get()).status_code == 404


def test_signing_in_is_required(cast: Cast, upload: Upload, client: Client) -> None:
    upload(cast.alice, cast.handbook, {"a.md": b"# A"})
    assert original(client, Document.objects.get()).status_code == 302


def test_the_document_page_links_to_its_original(cast: Cast, upload: Upload, signed_in: SignIn) -> None:
    upload(cast.alice, cast.handbook, {"handbook.pdf": make_pdf([["Handbook page"]])})
    document = Document.objects.get()
    page = signed_in(cast.bob).get(f"/doc/{document.pk}").content.decode()
    assert f'imported from <a href="/doc/{document.pk}/original?v=1">handbook.pdf</a>' in page


def test_an_original_lost_from_storage_is_a_404_and_a_logged_error_not_a_server_error(
    cast: Cast, upload: Upload, signed_in: SignIn, import_storage: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upload(cast.alice, cast.handbook, {"lost.md": b"# Lost"})
    document = Document.objects.get()
    for stored in (import_storage / "originals").glob("*/*/*"):
        stored.unlink()  # a volume or bucket not restored with the database
    assert original(signed_in(cast.alice), document).status_code == 404
    assert "missing from the imports storage" in caplog.text, "the operator is told"
