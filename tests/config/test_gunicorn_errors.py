"""Requests gunicorn refuses before Django sees them, over raw sockets to a real gunicorn: the API's JSON errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.gunicorn_worker import JsonErrorThreadWorker
from tests.servers import GunicornServer, RawResponse, raw_exchange

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GunicornServer]:
    server = GunicornServer(log_path=tmp_path_factory.mktemp("gunicorn-errors") / "gunicorn.log").start()
    yield server
    server.stop()


def post(path: str, *headers: bytes, body: bytes = b"") -> bytes:
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", *headers, b"", body]
    return b"\r\n".join(lines)


def assert_json_error(response: RawResponse, status: int, code: str) -> None:
    assert response.status == status, response
    assert response.headers["content-type"] == "application/json", response
    body = json.loads(response.body)
    assert set(body) == {"error", "message"} and body["error"] == code, body
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"]), response


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (post("/api/documents.list", b"X-Big: " + b"a" * 20_000), 431, "headers_too_large"),
        (post("/api/documents.list", *(f"X-H{n}: 1".encode() for n in range(150))), 431, "headers_too_large"),
        (post("/api/documents.list", b"X-Control: a\x01b"), 400, "malformed_request"),
        (post("/api/documents.list", b"X-\x7fName: 1"), 400, "malformed_request"),
        (post("/api/docu\x01ments.list"), 400, "malformed_request"),
        (b"GARBAGE\r\n\r\n", 400, "malformed_request"),
        (b"POST /api/documents.list HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 400, "malformed_request"),
        (post("/api/" + "a" * 10_000), 414, "uri_too_long"),
        (post("/api/documents.list", b"Transfer-Encoding: chunked", b"Content-Length: 3"), 400, "malformed_request"),
        (post("/api/documents.list", b"Transfer-Encoding: brotli"), 400, "malformed_request"),
        (post("/api/documents.list", b"Expect: 200-ok", b"Content-Length: 2", body=b"{}"), 417, "malformed_request"),
    ],
    ids=[
        "a-huge-header",
        "too-many-headers",
        "a-control-character-in-a-header",
        "a-control-character-in-a-header-name",
        "a-control-character-in-the-path",
        "no-request-line",
        "an-unknown-http-version",
        "a-request-line-too-long",
        "chunked-and-a-length",
        "an-unknown-transfer-coding",
        "an-unknown-expectation",
    ],
)
def test_a_request_gunicorn_refuses_gets_the_json_error_shape(
    server: GunicornServer, request_bytes: bytes, status: int, code: str
) -> None:
    [response] = raw_exchange(server.url, request_bytes)
    assert_json_error(response, status, code)


def test_a_bad_chunk_after_the_answer_is_answered_in_json_too(server: GunicornServer) -> None:
    # Django reads no body without Content-Length and answers first; gunicorn meets the bad chunk
    # while reading past the body to the next request, and answers that too.
    request_bytes = post(
        "/api/documents.list", b"Content-Type: application/json", b"Transfer-Encoding: chunked", body=b"zz\r\n{}\r\n0\r\n\r\n"
    )
    responses = raw_exchange(server.url, request_bytes)
    assert [r.status for r in responses] == [401, 400]
    assert_json_error(responses[0], 401, "unauthorized")
    assert_json_error(responses[1], 400, "malformed_request")


def test_the_refusal_is_logged_with_its_request_id(server: GunicornServer) -> None:
    [response] = raw_exchange(server.url, b"GARBAGE\r\n\r\n")
    log = Path(server.log_path).read_text()
    assert f"(request id {response.headers['x-request-id']})" in log


def test_gunicorn_serves_cairn_with_the_json_error_worker(server: GunicornServer) -> None:
    assert f"Using worker: {JsonErrorThreadWorker.__module__}.{JsonErrorThreadWorker.__name__}" in server.log_path.read_text()
