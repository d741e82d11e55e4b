"""The /rag page (ask a question, watch the cited answer stream in) and the /graph page (explore the knowledge graph)."""

from __future__ import annotations

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


@require_GET
@with_csp
@login_required
def ask_page(request: AuthenticatedHttpRequest) -> HttpResponse:
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
    # The page reads everything through graph.entities, graph.entity and graph.passage, which filter
    # by the viewer; it renders no data of its own, only the legend of entity kinds.
    return render(request, "rag/graph.html", {"kinds": EntityKind.choices})
