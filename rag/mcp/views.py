"""POST /mcp: one Model Context Protocol message, answered by the MCP server as the API token's user."""

from __future__ import annotations

import contextvars
import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from mcp.types import PARSE_ERROR
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView
from starlette.types import Scope

from permissions.authentication import ApiTokenAuthentication, may_write
from permissions.http import AuthenticatedRequest
from rag.mcp.server import CALLER, CONTEXT, runtime
from rag.mcp.tools import Caller


def asgi_scope(request: HttpRequest) -> Scope:
    """The ASGI scope of a Django request (its body is passed on separately)."""
    meta = request.META
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": meta.get("SERVER_PROTOCOL", "HTTP/1.1").partition("/")[2] or "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": meta.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()],
        "client": (meta.get("REMOTE_ADDR", ""), int(meta.get("REMOTE_PORT") or 0)),
        "server": (meta.get("SERVER_NAME", ""), int(meta.get("SERVER_PORT") or 0)),
    }


def parse_error(body: bytes) -> str | None:
    """Why `body` is not JSON, or None.

    The transport answers only json.loads' JSONDecodeError itself: bytes that are not UTF-8, or nesting
    deeper than json.loads recurses, would leave it as a 500. Parsing here first (a small body's cost is
    microseconds) answers every one of them as the protocol says.
    """
    try:
        json.loads(body)
    except RecursionError:
        return "the message is nested too deeply"
    except UnicodeDecodeError:
        return "the message is not UTF-8"
    except ValueError as exc:
        return str(exc)
    return None


@extend_schema(exclude=True)  # not an RPC endpoint: agents list its tools through the protocol itself
class McpApi(APIView):
    """The MCP endpoint (streamable HTTP, stateless, JSON responses).

    Authenticated, authorised and throttled as the API is: a Bearer API token only (missing, bad,
    expired or revoked: 401 `unauthorized`), the rag.* endpoints' rate. GET (a server-sent event
    stream) and DELETE (ending a session) are 405: the server keeps no sessions and sends no
    messages of its own.
    """

    http_method_names = ["post"]
    # The tools only read; the answer tool keeps a conversation only for a write-scoped token (Caller.can_write).
    write_scope = False
    # Its tools read as rag.search and rag.answer do: from a healthy replica unless the client wrote lately.
    replica_reads = True
    authentication_classes = [ApiTokenAuthentication]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "rag"

    def perform_content_negotiation(self, request, force=False):
        # The transport answers what a POST may accept, as the protocol says; a GET for an event
        # stream (Accept: text/event-stream) gets its 405, not DRF's 406.
        return super().perform_content_negotiation(request, force=True)

    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        if reason := parse_error(request.body):
            error = {"code": PARSE_ERROR, "message": f"Parse error: {reason}."}
            return JsonResponse({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        caller = Caller(user=request.user, can_write=may_write(request))
        scope = {**asgi_scope(request._request), CALLER: caller, CONTEXT: contextvars.copy_context()}
        exchange = runtime().exchange(scope, request.body, timeout=settings.WEB_TIMEOUT)
        return HttpResponse(bytes(exchange.content), status=exchange.status, headers=dict(exchange.headers))
