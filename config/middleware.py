"""Request ids on every request and its log lines, and the API's one error shape for what DRF never sees.

DRF's exception handler (config.exceptions) shapes the errors of its views. Everything else under
/api/ — unknown routes, a method or body that no view accepts, an exception anywhere, a debug page
— is turned into `{"error", "message"}` here, the outermost middleware, so nothing under /api/
ever answers with HTML or a stack trace.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from config.errors import error_body

logger = logging.getLogger("cairn.request")

REQUEST_ID_HEADER = "X-Request-ID"
# A client may send its own id (a proxy's, a trace's); anything else is replaced by ours.
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{8,64}")
_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

# The code each error status gets when no view chose one.
STATUS_CODES = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "request_too_large",
    429: "rate_limited",
    500: "server_error",
}


def current_request_id() -> str:
    return _request_id.get()


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every log record (`%(request_id)s`; `-` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get()
        return True


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or request.path == "/mcp"


def _is_json(response: HttpResponseBase) -> bool:
    return response.get("Content-Type", "").startswith(("application/json", "text/event-stream"))


def api_error_response(status: int, request_id: str, message: str | None = None) -> JsonResponse:
    code = STATUS_CODES.get(status, "server_error" if status >= 500 else "invalid_request")
    if message is None:
        if status == 404:
            message = "No such endpoint. Every endpoint is POST /api/<resource>.<verb>; see /api/schema."
        elif status >= 500:
            message = f"An unexpected error occurred. Quote request id {request_id} when reporting it."
        else:
            message = f"{HTTPStatus(status).phrase}." if status in HTTPStatus._value2member_map_ else "The request failed."
    return JsonResponse(error_body(code, message), status=status)


class RequestIdMiddleware:
    """Outermost: gives each request an id (the `X-Request-ID` response header) and keeps /api/ errors JSON."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        sent = request.headers.get(REQUEST_ID_HEADER, "")
        request_id = sent if _CLIENT_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = _request_id.set(request_id)
        try:
            try:
                response = self.get_response(request)
            except Exception:  # the inner handler converts exceptions; this is the last line of defence
                logger.exception("unhandled error on %s %s", request.method, request.path)
                response = api_error_response(500, request_id) if _is_api(request) else HttpResponse("Server error", status=500)
            if _is_api(request) and response.status_code >= 400 and not _is_json(response):
                response = api_error_response(response.status_code, request_id)
            response[REQUEST_ID_HEADER] = request_id
            return response
        finally:
            _request_id.reset(token)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponseBase | None:
        """A view's unexpected exception under /api/: logged with the request id, answered as JSON (debug or not)."""
        if not _is_api(request):
            return None
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return api_error_response(500, getattr(request, "request_id", "-"))
