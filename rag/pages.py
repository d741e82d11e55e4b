"""The /rag page (ask a question, watch the cited answer stream in) and the /graph page (explore the knowledge graph)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from config.csp import with_csp
from documents.models import Document
from documents.selectors import collection_list
from permissions.http import AuthenticatedHttpRequest
from permissions.policy import can_manage_collections, can_write
from rag.models import EntityKind

MAX_EXAMPLE_QUESTIONS = 6


def _disabled(request: AuthenticatedHttpRequest, *, page: str, heading: str) -> HttpResponse:
    """What /rag and /graph show with RAG_ENABLED=false: that the feature is off, and what still works."""
    return render(request, "rag/disabled.html", {"page": page, "heading": heading})


def _example_questions(request: AuthenticatedHttpRequest) -> list[str]:
    """The team's own example questions (set in the admin, or by setup_demo): another team's never show."""
    team = request.user.team
    questions = team.example_questions if team is not None else []
    return [q for q in questions if isinstance(q, str) and q.strip()][:MAX_EXAMPLE_QUESTIONS]


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
            "examples": _example_questions(request),
            "collections": collection_list(user=request.user).only("id", "name"),
            # Nothing to ask about yet (a new team): the page says what to do first instead.
            "nothing_to_read": not Document.objects.visible_to(request.user).exists(),
            "can_manage": can_manage_collections(request.user),
            # A read-only member's answers are kept in no conversation and cannot be rated (policy.can_write).
            "can_write": can_write(request.user),
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
