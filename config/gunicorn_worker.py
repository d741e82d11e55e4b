"""gunicorn's gthread worker, answering the requests gunicorn refuses itself in the API's JSON error shape.

gunicorn parses each request before Django sees it, and answers one it cannot parse (headers over its
limits, a control character in the request line or a header, a bad chunk of a chunked body) with an
HTML page of its own. Such a request never reaches config.middleware, so this worker answers it:
`{"error", "message"}` with an `X-Request-ID`, which its log line names, whatever the path, since the
path is often what failed to parse. `config.gunicorn` makes it the worker class.
"""

from __future__ import annotations

import json
import ssl
import uuid
from datetime import datetime
from http import HTTPStatus
from typing import Any

from gunicorn import util
from gunicorn.http import errors
from gunicorn.http.wsgi import Response, default_environ
from gunicorn.workers.gthread import ThreadWorker

from config.errors import error_body

# How each request gunicorn refuses is answered, first match first. gunicorn answers a transfer coding it
# does not know with 501; a 5xx would tell clients (and alerts) that the server failed and a retry may
# succeed, when the request itself is what is wrong, so it is a 400 here.
REFUSALS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int, str], ...] = (
    (errors.LimitRequestHeaders, 431, "headers_too_large"),
    (errors.LimitRequestLine, 414, "uri_too_long"),
    (errors.ForbiddenProxyRequest, 403, "forbidden"),
    (errors.ExpectationFailed, 417, "malformed_request"),
    ((errors.ParseException, ssl.SSLError), 400, "malformed_request"),
)
# Faults of the server, not the request: a header the application sent, gunicorn's own settings.
SERVER_FAULTS = (errors.InvalidResponseHeader, errors.InvalidResponseHeaderName, errors.ConfigurationProblem)


def refusal(exc: BaseException, cfg: Any) -> tuple[int, str, str] | None:
    """The status, code and message of a request gunicorn could not parse; None when the fault is the server's."""
    if isinstance(exc, SERVER_FAULTS):
        return None
    for kinds, status, code in REFUSALS:
        if isinstance(exc, kinds):
            return status, code, _message(exc, cfg)
    return None


def _message(exc: BaseException, cfg: Any) -> str:
    if isinstance(exc, errors.LimitRequestHeaders):
        return (
            f"The request's headers are too large: at most {cfg.limit_request_fields} headers "
            f"of {cfg.limit_request_field_size} bytes each."
        )
    if isinstance(exc, errors.LimitRequestLine):
        return f"The request line is longer than {cfg.limit_request_line} bytes."
    if isinstance(exc, errors.ForbiddenProxyRequest):
        return "PROXY protocol from an address not in forwarded_allow_ips."
    return f"The request is not valid HTTP: {str(exc)[:200]}"


class JsonErrorThreadWorker(ThreadWorker):
    """The gthread worker whose own error responses are the API's JSON; see the module docstring."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        started = datetime.now()
        addr = addr or ("", -1)  # a unix socket's peer has no address
        request_id = uuid.uuid4().hex
        refused = refusal(exc, self.cfg)
        if refused is not None:
            status, code, message = refused
            self.log.warning("Invalid request from ip=%s: %s (request id %s)", addr[0], exc, request_id)
        else:
            where = f"{req.method} {req.uri}" if hasattr(req, "method") and hasattr(req, "uri") else "(no URI read)"
            self.log.exception("Error handling request %s (request id %s)", where, request_id)
            status, code = 500, "server_error"
            message = f"An unexpected error occurred. Quote request id {request_id} when reporting it."
        reason = HTTPStatus(status).phrase
        body = json.dumps(error_body(code, message)).encode()
        if req is not None:  # the access log line gunicorn writes for its own answers
            environ = default_environ(req, client, self.cfg)
            environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = addr[0], str(addr[1])
            response = Response(req, client, self.cfg)
            response.status = f"{status} {reason}"
            response.response_length = len(body)
            self.log.access(response, req, environ, datetime.now() - started)
        head = (
            f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Request-ID: {request_id}\r\n\r\n"
        )
        try:
            util.write_nonblock(client, head.encode("latin-1") + body)
        except Exception:
            self.log.debug("Failed to send error message.")
