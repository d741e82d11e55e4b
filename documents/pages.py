"""The document page: its Markdown rendered safely, a cited passage highlighted when the link carries its offsets."""

from __future__ import annotations

import logging
import uuid

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from config.csp import with_csp
from config.errors import NotFound
from documents.models import SourceFormat, import_storage
from documents.rendering import document_html
from documents.selectors import document_get, document_source, source_of, writable_collections
from permissions.http import AuthenticatedHttpRequest

logger = logging.getLogger("documents")


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) <= 9 else None


@require_GET
@with_csp
@login_required
def document_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    try:
        document = document_get(user=request.user, document_id=document_id, include_archived=True)
    except NotFound as exc:
        raise Http404("Document not found.") from exc
    version, start, end = (_int_param(request, name) for name in ("v", "start", "end"))
    highlight, stale = None, False
    if version is not None and version != document.version:
        stale = True  # the offsets point into another version of the text: highlighting them would mislead
    elif start is not None and end is not None and start < end <= len(document.text):
        highlight = (start, end)
    return render(
        request,
        "documents/document.html",
        {
            "document": document,
            # Safe: document_html renders raw HTML as text and allows only safe links (documents/rendering.py).
            "html": mark_safe(document_html(document.text, highlight=highlight)),
            "stale": stale,
            "cited_version": version,
            "source": source_of(document=document),
        },
    )


# PDFs open in the browser's viewer (at the cited page with #page=N); anything else is a download,
# so an imported HTML file can never run as a page of this site.
_INLINE_TYPES: dict[str, str] = {SourceFormat.PDF: "application/pdf"}


@require_GET
@login_required
def document_original(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponseBase:
    """The file a document was imported from (`?v=` picks the version), for whoever may read the document."""
    try:
        source = document_source(user=request.user, document_id=document_id, version=_int_param(request, "v"))
    except NotFound as exc:
        raise Http404("Document not found.") from exc
    if source is None:
        raise Http404("This document was not imported from a file.")
    inline = source.format in _INLINE_TYPES
    assert source.original.name, "every source is saved with its original (documents.ingestion.jobs)"
    storage = import_storage()
    if not storage.exists(source.original.name):
        # The imports storage lost it (a volume or bucket not restored with the database): say so, and tell the operator.
        logger.error("The original %s of document %s is missing from the imports storage", source.original.name, document_id)
        raise Http404("The original file is missing from storage.")
    # Read from the storage web and worker share (a folder or a bucket) in chunks, never as a path on this disk.
    response = FileResponse(
        storage.open(source.original.name, "rb"),
        as_attachment=not inline,
        filename=source.filename,
        content_type=_INLINE_TYPES.get(source.format, "application/octet-stream"),
    )
    response["X-Content-Type-Options"] = "nosniff"
    if not inline:
        # Chrome will not show a PDF in a sandboxed document, so only downloads get the sandbox.
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Referrer-Policy"] = "same-origin"
    return response


@require_GET
@with_csp
@login_required
def import_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Drop files to import them into a collection you may write to; progress and each file's outcome live."""
    return render(request, "documents/import.html", {"collections": writable_collections(user=request.user)})
