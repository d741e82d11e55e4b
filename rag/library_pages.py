"""Browsing and searching the library: /documents and /collections/<id> list the documents you may read with where
each stands in the index; /search is rag.search as a page, each hit linked to its passage.

Here in rag, not in documents, because the lists show rag's index state (documents may not import rag). Every
list and count goes through the one visibility queryset (documents.selectors); the search is rag.search's own
(`search_request`), its input validated and its hits rendered as the API's (rag.api.search).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models.functions import Lower
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from rest_framework.throttling import UserRateThrottle

from config.csp import with_csp
from config.errors import ApplicationError, NoEmbeddings, NotFound
from documents.models import Collection, Document
from documents.selectors import collection_document_counts, collection_get, collection_list, document_list, tag_list
from documents.tags import MAX_FILTER_TAGS, normalise_tags, split_tags
from permissions.http import AuthenticatedHttpRequest
from permissions.policy import can_manage_collections, can_write_collection
from rag.api.search import RagSearchApi, search_arguments, search_response_body
from rag.indexing.index_status import DocumentIndexState, document_index_states
from rag.retrieval.hits import Hit
from rag.retrieval.search import MODES, search_request
from rag.retrieval.snippets import Snippet, passage_snippets

PAGE_SIZE = 25
# The tags offered as filters beside a list: the most used in its scope.
TAG_CHOICES = 30
SORTS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "updated": ("Last updated", ("-updated_at", "id")),
    "title": ("Title", (Lower("title"), "id")),
}
SEARCH_LIMIT = 20
MODE_LABELS = {"hybrid": "Hybrid", "vector": "Vector", "keyword": "Keyword", "graph": "Graph"}
# rag.search's input fields as the search form names them, for its error messages.
_FORM_FIELDS = {"query": "Query", "mode": "Mode", "collectionId": "Collection", "tags": "Tags"}


@dataclass(frozen=True)
class _Row:
    document: Document
    index: DocumentIndexState | None  # None with RAG_ENABLED=false: nothing is indexed
    collection_readable: bool  # False for a document shared with the viewer in a collection they cannot read


@dataclass(frozen=True)
class _TagChoice:
    name: str
    documents: int
    selected: bool
    href: str  # the list with this tag added to the filter, or taken out of it


def _filter_href(request: AuthenticatedHttpRequest, tags: list[str]) -> str:
    params = request.GET.copy()
    params.setlist("tag", sorted(tags))
    params.pop("page", None)
    return f"?{params.urlencode()}" if params else request.path


@require_GET
@with_csp
@login_required
def documents_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every document you may read, whatever its collection (those shared with you on their own too)."""
    return _library(request, collection=None)


@require_GET
@with_csp
@login_required
def collection_page(request: AuthenticatedHttpRequest, collection_id: uuid.UUID) -> HttpResponse:
    try:
        collection = collection_get(user=request.user, collection_id=collection_id)
    except NotFound as exc:
        raise Http404("Collection not found.") from exc
    return _library(request, collection=collection)


def _library(request: AuthenticatedHttpRequest, *, collection: Collection | None) -> HttpResponse:
    user = request.user
    sort = request.GET.get("sort", "")
    sort = sort if sort in SORTS else "updated"
    status, error = 200, ""
    try:
        tags = normalise_tags(request.GET.getlist("tag"), limit=MAX_FILTER_TAGS)
    except ValidationError as exc:
        tags, status, error = [], 400, f"The tag filter cannot be read: {exc.messages[0]}"
    collection_id = collection.pk if collection is not None else None
    documents = document_list(user=user, collection_id=collection_id, tags=tags) if not error else Document.objects.none()
    page = Paginator(documents.select_related("collection", "created_by").order_by(*SORTS[sort][1]), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    states = document_index_states(user=user, document_ids=[d.pk for d in page]) if settings.RAG_ENABLED else {}
    collections = list(collection_list(user=user).only("id", "name", "team_id", "default_access"))
    readable = {c.pk for c in collections}
    counts = collection_document_counts(user=user)
    offered, _ = tag_list(user=user, collection_id=collection_id, limit=TAG_CHOICES)
    # A selected tag stays on offer (to take it out again) even where no document of the list carries it.
    offered_names = {t.name for t in offered}
    choices = [
        _TagChoice(t.name, t.documents, t.name in tags, _filter_href(request, sorted(set(tags) ^ {t.name}))) for t in offered
    ] + [
        _TagChoice(name, 0, True, _filter_href(request, [t for t in tags if t != name]))
        for name in tags
        if name not in offered_names
    ]
    writable = any(can_write_collection(user, c) for c in collections)
    return render(
        request,
        "rag/library.html",
        {
            "collection": collection,
            "sidebar": [(c, counts.get(c.pk, 0)) for c in collections],
            "total": sum(counts.values()),
            "page": page,
            "rows": [_Row(d, states.get(d.pk), d.collection_id in readable) for d in page],
            "tags": tags,
            "tag_choices": choices,
            "clear_tags": _filter_href(request, []),
            "sort": sort,
            "sorts": {key: label for key, (label, _) in SORTS.items()},
            "index_shown": settings.RAG_ENABLED,
            "can_import": can_write_collection(user, collection) if collection is not None else writable,
            "can_create_collections": can_manage_collections(user),
            "error": error,
        },
        status=status,
    )


class _SearchThrottle(UserRateThrottle):
    """The API's `rag` rate, in the same bucket: a search costs as much from this page as over the API."""

    scope = "rag"


def _throttled(request: AuthenticatedHttpRequest) -> int:
    """Seconds to wait when the viewer has searched too often (the API's `rag` rate and bucket); 0 when they may search."""
    throttle = _SearchThrottle()
    # cast: DRF's user throttle reads only the request's user (the address for anonymous callers), never the view.
    if throttle.allow_request(cast(Any, request), cast(Any, None)):
        return 0
    return max(1, int(throttle.wait() or 1))


@dataclass(frozen=True)
class _Result:
    hit: dict[str, Any]  # as rag.search renders it (search_response_body): id, document, score, explain
    href: str  # the document page, the passage highlighted
    snippet: Snippet


@require_GET
@with_csp
@login_required
def search_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """rag.search as a page: the query's best passages of the documents you may read, each explained on request."""
    if not settings.RAG_ENABLED:
        return render(request, "rag/disabled.html", {"page": "Search", "heading": "Search and answers are turned off"})
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode", "hybrid")
    collection = request.GET.get("collection", "")
    tags_text = request.GET.get("tags", "")
    explain = request.GET.get("explain") == "1"
    context: dict[str, Any] = {
        "query": query,
        "mode": mode,
        "modes": [(m, MODE_LABELS[m]) for m in MODES],
        "collection": collection,
        "collections": collection_list(user=request.user).only("id", "name"),
        "tags": tags_text,
        "explain": explain,
        "limit": SEARCH_LIMIT,
        "results": None,
    }
    if not query:
        return render(request, "rag/search.html", context)
    data = {
        "query": query,
        "mode": mode,
        "limit": SEARCH_LIMIT,
        "collectionId": collection or None,
        "tags": split_tags(tags_text),
        "explain": explain,
    }
    status = 200
    form = RagSearchApi.Input(data=data)
    if not form.is_valid():
        status, context["error"] = 400, _form_error(form.errors)
    elif wait := _throttled(request):
        status, context["error"] = 429, f"Too many searches: try again in {wait} seconds."
    else:
        try:
            outcome = search_request(user=request.user, **search_arguments(form.validated_data))
        except NotFound as exc:
            raise Http404("Collection not found.") from exc  # the collection filter names one you may not read
        except NoEmbeddings:
            context["nothing_indexed"] = True
        except ApplicationError as exc:
            status, context["error"] = exc.status, exc.message
        else:
            body = search_response_body(outcome)
            snippets = passage_snippets(query=query, passages=[r.hit.text for r in outcome.ranked])
            context["degraded"] = outcome.degraded
            context["results"] = [
                _Result(hit=hit, href=_passage_href(ranked.document, ranked.hit), snippet=snippet)
                for ranked, hit, snippet in zip(outcome.ranked, body["data"], snippets, strict=True)
            ]
    return render(request, "rag/search.html", context, status=status)


def _passage_href(document: Document, hit: Hit) -> str:
    """The document page with the passage highlighted (documents.pages.document_page reads v, start and end)."""
    return f"{document.url}?v={hit.version}&start={hit.start}&end={hit.end}#passage"


def _form_error(errors: dict[str, Any]) -> str:
    """The first of rag.search's input errors, named as the form names the field."""
    field, detail = next(iter(errors.items()))
    while not isinstance(detail, str):  # a list of messages, or a list field's messages by item
        detail = next(iter(detail.values() if isinstance(detail, dict) else detail))
    return f"{_FORM_FIELDS.get(field, field)}: {detail}"
