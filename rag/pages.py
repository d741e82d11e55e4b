"""The /rag page (ask a question, watch the cited answer stream in) and the /graph page (explore the knowledge graph)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from config.csp import with_csp
from documents.selectors import collection_list
from permissions.http import AuthenticatedHttpRequest
from rag.models import EntityKind

EXAMPLE_QUESTIONS = [
    "How many vacation days do I get?",
    "How do I roll back a deployment?",
    "What should I do if I lose my laptop?",
    "When are the core hours for remote work?",
]


def _disabled(request: AuthenticatedHttpRequest, *, page: str, heading: str) -> HttpResponse:
    """What /rag and /graph show with RAG_ENABLED=false: that the feature is off, and what still works."""
    return render(request, "rag/disabled.html", {"page": page, "heading": heading})


@require_GET
@with_csp
@login_required
def ask_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not settings.RAG_ENABLED:
        return _disabled(request, page="Ask", heading="Search and answers are turned off")
    return render(
        request,
        "rag/ask.html",
        {
            "examples": EXAMPLE_QUESTIONS,
            "collections": collection_list(user=request.user).only("id", "name"),
        },
    )


@require_GET
@with_csp
@login_required
def graph_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not settings.RAG_ENABLED:
        return _disabled(request, page="Graph", heading="The knowledge graph is turned off")
    # The page reads everything through graph.entities, graph.entity and graph.passage, which filter
    # by the viewer; it renders no data of its own, only the legend of entity kinds.
    return render(request, "rag/graph.html", {"kinds": EntityKind.choices})
