"""An install without a team shows its setup page first, as Grafana and Outline do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from permissions.members.selectors import team_exists

# What answers as usual before setup: machines (the API, MCP, health, metrics), files, the operators' admin,
# and the pages of setting up and joining.
NOT_PAGES = ("/api/", "/mcp", "/health", "/metrics", "/static/", "/admin/", "/setup", "/invite/")


class SetupMiddleware:
    """Until a team exists, every page redirects to /setup.

    Decided once the URL is resolved (`process_view`): an unknown address is still not found, and the
    metrics label the redirect with the page's route.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        # One indexed query per page request (never for the API): a flag kept in the process would go
        # stale when the database is swapped under it (a restore, the tests).
        if request.path == "/" or request.path.startswith(NOT_PAGES) or team_exists():  # "/": a redirect to /rag
            return None
        return HttpResponseRedirect("/setup")
