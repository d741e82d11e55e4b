"""The /rag page, the document page with a highlighted passage, and sign-in.

Pages set a strict Content-Security-Policy: only this response's inline script and style (by nonce)
run, and nothing is fetched from another origin, so even text that slipped past escaping could not
run a script or load a remote image.
"""
from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from config.errors import NotFound
from documents.selectors import collection_list, document_get

EXAMPLE_QUESTIONS = [
    "How many vacation days do I get?",
    "How do I roll back a deployment?",
    "What should I do if I lose my laptop?",
    "When are the core hours for remote work?",
]


def with_csp(view):
    """Give the template a nonce and allow only what carries it."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        request.csp_nonce = secrets.token_urlsafe(16)
        response = view(request, *args, **kwargs)
        nonce = request.csp_nonce
        response["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self'; "
            "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        response["Referrer-Policy"] = "same-origin"
        return response

    return wrapped


@require_GET
@with_csp
@login_required
def ask_page(request: HttpRequest) -> HttpResponse:
    return render(request, "rag/ask.html", {
        "examples": EXAMPLE_QUESTIONS,
        "collections": collection_list(user=request.user).only("id", "name"),
    })


@dataclass
class Highlight:
    before: str
    passage: str
    after: str


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) <= 9 else None


@require_GET
@with_csp
@login_required
def document_page(request: HttpRequest, document_id: uuid.UUID) -> HttpResponse:
    try:
        document = document_get(user=request.user, document_id=document_id, include_archived=True)
    except NotFound as exc:
        raise Http404("Document not found.") from exc
    version, start, end = (_int_param(request, name) for name in ("v", "start", "end"))
    highlight, stale = None, False
    if version is not None and version != document.version:
        stale = True  # the offsets point into another version of the text: highlighting them would mislead
    elif start is not None and end is not None and start < end <= len(document.text):
        text = document.text
        highlight = Highlight(before=text[:start], passage=text[start:end], after=text[end:])
    return render(request, "rag/document.html", {"document": document, "highlight": highlight, "stale": stale, "cited_version": version})


login_page = with_csp(auth_views.LoginView.as_view(template_name="rag/login.html", redirect_authenticated_user=True))
logout_page = auth_views.LogoutView.as_view()
