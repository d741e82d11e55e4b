"""The document page: its Markdown rendered safely, a cited passage highlighted when the link carries its offsets;
for those who may change it, editing with a live preview, moving, tags, archiving and deleting; its history.

Every view finds the document through `document_get` (the visibility queryset): one the viewer cannot read is
404, one they can read but not change is 403 for every change, as in the API. Changes go through the services.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.csp import with_csp
from config.errors import NotFound
from config.replicas import reads_from_replica
from documents import selectors, services
from documents.code import code_line_shift
from documents.diffs import text_diff
from documents.index_state import index_state
from documents.models import Document, DocumentVersion, Source, SourceFormat, import_storage
from documents.rendering import document_html
from documents.selectors import document_get, document_source, source_of, writable_collections
from documents.tags import normalise_tags, split_tags
from permissions.http import AuthenticatedHttpRequest
from permissions.policy import can_manage_collections, can_write, can_write_collection, can_write_document

# The history on the document page; the API (documents.versions) pages through all of it.
HISTORY_SHOWN = 50

logger = logging.getLogger("documents")


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) <= 9 else None


def _readable(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> Document:
    try:
        return document_get(user=request.user, document_id=document_id, include_archived=True)
    except NotFound as exc:
        raise Http404("Document not found.") from exc


def _changeable(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> Document:
    document = _readable(request, document_id)
    if not can_write_document(request.user, document):
        raise PermissionDenied("You can read this document but not change it.")
    return document


def _html(text: str, *, title: str, highlight: tuple[int, int] | None = None) -> SafeString:
    # Safe: document_html renders raw HTML as text and allows only safe links (documents/rendering.py).
    return mark_safe(document_html(text, highlight=highlight, title=title))


@reads_from_replica
@require_GET
@with_csp
@login_required
def document_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = _readable(request, document_id)
    version, start, end = (_int_param(request, name) for name in ("v", "start", "end"))
    highlight, stale = None, False
    if version is not None and version != document.version:
        stale = True  # the offsets point into another version of the text: highlighting them would mislead
    elif start is not None and end is not None and start < end <= len(document.text):
        highlight = (start, end)
    source = source_of(document=document)
    can_write = can_write_document(request.user, document)
    history, history_total = _history(document)
    return render(
        request,
        "documents/document.html",
        {
            "document": document,
            "html": _html(document.text, title=document.title, highlight=highlight),
            "stale": stale,
            "cited_version": version,
            "source": source,
            # Only a web address is a link: a path on a server or "path@commit" is shown as text.
            "origin_is_link": document.origin.startswith(("https://", "http://")),
            "cited": _cited_place(document, source, highlight) if highlight else None,
            "index_state": index_state(document),
            "can_write": can_write,
            "move_to": [c for c in writable_collections(user=request.user) if c.pk != document.collection_id]
            if can_write
            else [],
            "history": history,
            "history_total": history_total,
        },
    )


@dataclass(frozen=True)
class CitedPlace:
    location: str  # as a citation gives it: `path:start-end`, or `path#page=N` for a PDF
    href: str | None  # the original PDF at that page


def _cited_place(document: Document, source: Source | None, highlight: tuple[int, int]) -> CitedPlace:
    """Where the highlighted quote is: the page of the PDF the version was imported from, else its lines."""
    where = source.path if source is not None else document.title
    if source is not None and source.page_map and source.document_version == document.version:
        page = source.page_of(highlight[0])
        return CitedPlace(location=f"{where}#page={page}", href=f"{source.original_url}#page={page}")
    first = max(1, document.text.count("\n", 0, highlight[0]) + 1 - code_line_shift(document.text))
    last = first + document.text.count("\n", highlight[0], max(highlight[0], highlight[1] - 1))
    return CitedPlace(location=f"{where}:{first}-{last}", href=None)


@dataclass(frozen=True)
class HistoryRow:
    entry: DocumentVersion
    change: str  # what it changed from the entry before it, in words


def _history(document: Document) -> tuple[list[HistoryRow], int]:
    """The latest entries of the history, each with what it changed; and how many entries there are."""
    entries = list(selectors.document_versions(document=document)[: HISTORY_SHOWN + 1])
    rows = [HistoryRow(entry, _change(entry, older)) for entry, older in zip(entries, [*entries[1:], None], strict=True)]
    total = len(entries) if len(entries) <= HISTORY_SHOWN else selectors.document_versions(document=document).count()
    return rows[:HISTORY_SHOWN], total


def _change(entry: DocumentVersion, older: DocumentVersion | None) -> str:
    if older is None:
        return "created" if entry.version == 1 else ""  # else the oldest entry kept (history began after its creation)
    text, title = entry.version != older.version, entry.title != older.title
    return {(True, True): "text and title changed", (True, False): "text changed", (False, True): "title changed"}.get(
        (text, title), ""
    )


class DocumentEditForm(forms.Form):
    title = forms.CharField(max_length=500)
    text = forms.CharField(required=False, strip=False, max_length=settings.DOCUMENT_MAX_TEXT_LENGTH, widget=forms.Textarea)
    # The version the editor started from: saving over a newer one would silently undo someone's change.
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


@require_http_methods(["GET", "POST"])
@with_csp
@login_required
def document_edit_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    """Edit the title and Markdown text, with a preview the server renders; saving makes a new version."""
    document = _changeable(request, document_id)
    if request.method == "GET":
        form = DocumentEditForm(initial={"title": document.title, "text": document.text, "version": document.version})
    else:
        form = DocumentEditForm(request.POST)
        if form.is_valid() and form.cleaned_data["version"] != document.version:
            # The form comes back with the user's text and the newer version, so saving again knowingly replaces it.
            data = request.POST.copy()
            data["version"] = str(document.version)
            form = DocumentEditForm(data)
            form.is_valid()
            form.add_error(
                None,
                f"Someone saved version {document.version} while you were editing. Your text is kept below: "
                "open the document in another tab to compare, then save again to replace theirs.",
            )
        elif form.is_valid():
            version, title = document.version, document.title
            document = services.document_update(
                document=document, by=request.user, title=form.cleaned_data["title"], text=form.cleaned_data["text"]
            )
            if document.version != version:
                messages.success(request, f"Saved as version {document.version}.")
            else:
                messages.info(request, "Title saved." if document.title != title else "Nothing changed.")
            return redirect(document.url)
    text, title = (form.data.get("text", ""), form.data.get("title", "")) if form.is_bound else (document.text, document.title)
    return render(
        request,
        "documents/edit.html",
        {"document": document, "form": form, "preview": _html(text, title=title)},
        status=400 if form.errors else 200,
    )


@require_POST
@login_required
def document_preview(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> JsonResponse:
    """The edit page's preview: the posted text rendered by the document page's own renderer."""
    _changeable(request, document_id)
    text, title = request.POST.get("text", ""), request.POST.get("title", "")
    if len(text) > settings.DOCUMENT_MAX_TEXT_LENGTH:
        return JsonResponse({"error": f"The text is longer than {settings.DOCUMENT_MAX_TEXT_LENGTH:,} characters."}, status=400)
    return JsonResponse({"html": document_html(text, title=title)})


@require_GET
@login_required
def document_index_state(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> JsonResponse:
    """Whether the document's latest version is searchable yet, which the page asks again until it is."""
    document = _readable(request, document_id)
    return JsonResponse({"version": document.version, "state": index_state(document)})


@require_POST
@login_required
def document_move_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = _changeable(request, document_id)
    try:
        collection = selectors.collection_get_to_change(
            user=request.user, collection_id=uuid.UUID(request.POST.get("collection", ""))
        )
    except (ValueError, NotFound) as exc:
        raise Http404("Collection not found.") from exc
    if not can_write_collection(request.user, collection):
        raise PermissionDenied("You can read this collection but not add documents to it.")
    services.document_move(document=document, collection=collection)
    messages.success(request, f"Moved to {collection.name}.")
    return redirect(document.url)


@require_POST
@login_required
def document_tags_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = _changeable(request, document_id)
    try:
        tags = normalise_tags(split_tags(request.POST.get("tags", "")))
    except ValidationError as exc:
        messages.error(request, f"Tags not saved: {' '.join(exc.messages)}")
    else:
        services.document_update(document=document, by=request.user, tags=tags)
        messages.success(request, "Tags saved." if tags else "Tags removed.")
    return redirect(document.url)


@require_POST
@login_required
def document_archive_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = services.document_archive(document=_changeable(request, document_id))
    messages.success(request, "Archived: the document no longer appears in lists, search or answers.")
    return redirect(document.url)


@require_POST
@login_required
def document_unarchive_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = services.document_unarchive(document=_changeable(request, document_id))
    messages.success(request, "Restored from the archive.")
    return redirect(document.url)


@require_POST
@with_csp
@login_required
def document_delete_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID) -> HttpResponse:
    document = services.document_delete(document=_changeable(request, document_id))
    return render(request, "documents/deleted.html", {"document": document})


@require_GET
@with_csp
@login_required
def document_version_page(request: AuthenticatedHttpRequest, document_id: uuid.UUID, entry_id: uuid.UUID) -> HttpResponse:
    """One entry of the history: what changed since the entry before it, and its text."""
    document = _readable(request, document_id)
    try:
        entry, previous = selectors.document_version_get(document=document, entry_id=entry_id)
    except NotFound as exc:
        raise Http404("Version not found.") from exc
    is_current = (entry.title, entry.text) == (document.title, document.text)
    return render(
        request,
        "documents/version.html",
        {
            "document": document,
            "entry": entry,
            "previous": previous,
            "diff": text_diff(previous.text if previous else "", entry.text),
            "html": _html(entry.text, title=entry.title),
            "can_restore": can_write_document(request.user, document) and not is_current,
            "is_current": is_current,
        },
    )


@require_POST
@login_required
def document_version_restore(request: AuthenticatedHttpRequest, document_id: uuid.UUID, entry_id: uuid.UUID) -> HttpResponse:
    """Make an entry's title and text the document's again (a new version when the text differs)."""
    document = _changeable(request, document_id)
    try:
        entry, _ = selectors.document_version_get(document=document, entry_id=entry_id)
    except NotFound as exc:
        raise Http404("Version not found.") from exc
    before = document.version
    document = services.document_revert(document=document, to=entry, by=request.user)
    if document.version != before:
        messages.success(request, f"Version {entry.version} restored as version {document.version}.")
    else:
        messages.info(request, f"The title of version {entry.version} restored.")
    return redirect(document.url)


# PDFs open in the browser's viewer (at the cited page with #page=N); anything else is a download,
# so an imported HTML file can never run as a page of this site.
_INLINE_TYPES: dict[str, str] = {SourceFormat.PDF: "application/pdf"}


@require_GET
@login_required
def document_by_title(request: AuthenticatedHttpRequest, title: str) -> HttpResponseBase:
    """Where a `[[Title]]` wiki link leads: the document of that title you may read (the newest), else 404."""
    document = Document.objects.visible_to(request.user).filter(title__iexact=title.strip()).order_by("-updated_at", "id").first()
    if document is None:
        raise Http404("No document of that title.")
    return redirect(document.url)


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
    return render(
        request,
        "documents/import.html",
        {
            "collections": writable_collections(user=request.user),
            "read_only": not can_write(request.user),
            "can_manage": can_manage_collections(request.user),
        },
    )
