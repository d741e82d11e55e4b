"""The Sources page: the team's sources, their state and last sync, add and edit, sync now, pause and resume.

The page renders the kinds and the collections a source may write into; everything else it reads and
changes through the sources.* endpoints, as the API's clients do.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from config.csp import with_csp
from connectors.apis import SourceKindOutput, kinds
from documents.selectors import writable_collections
from permissions.http import AuthenticatedHttpRequest
from permissions.policy import can_write


@require_GET
@with_csp
@login_required
def sources_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(
        request,
        "connectors/sources.html",
        {
            "kinds": SourceKindOutput(kinds(), many=True).data,
            "collections": [{"id": str(c.pk), "name": c.name} for c in writable_collections(user=request.user)],
            "read_only": not can_write(request.user),
        },
    )
