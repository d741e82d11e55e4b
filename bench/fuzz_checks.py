"""Schemathesis checks for bench/fuzz.py: every error under /api/ is `{"error", "message"}` JSON, with a request id."""

from __future__ import annotations

import schemathesis


def _header(response, name: str) -> str:
    for key, value in response.headers.items():
        if key.lower() == name:
            return value[0] if isinstance(value, list) else value
    return ""


@schemathesis.check
def error_has_the_one_json_shape(ctx, response, case):
    if response.status_code < 400:
        return None
    content_type = _header(response, "content-type")
    if not content_type.startswith(("application/json", "text/event-stream")):
        raise AssertionError(f"{response.status_code} answered with {content_type!r}, not JSON")
    if content_type.startswith("application/json"):
        body = response.json()
        if not (isinstance(body, dict) and set(body) == {"error", "message"} and isinstance(body["error"], str)):
            raise AssertionError(f"{response.status_code} body is not the error shape: {str(body)[:200]}")
    if not _header(response, "x-request-id"):
        raise AssertionError("no X-Request-ID header")
    return None
