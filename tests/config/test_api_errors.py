"""Everything under /api/ answers in one JSON error shape, with a request id, and never a debug page."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from pytest_django import Settings

import config.errors
from config.gunicorn_worker import REFUSALS
from config.middleware import STATUS_CODES
from documents.idempotency import IdempotencyKeyReused
from tests.conftest import ApiFor, Cast

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse
    from rest_framework.response import _MonkeyPatchedResponse

ROOT = Path(__file__).resolve().parents[2]


def assert_json_error(response: _MonkeyPatchedResponse | _MonkeyPatchedWSGIResponse, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error", "message"} and body["error"] == code, body
    assert "Traceback" not in body["message"] and "<html" not in response.content.decode().lower()
    return body


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_api_route_answers_not_found_in_json_even_in_debug_mode(db: None, settings: Settings, debug: bool) -> None:
    settings.DEBUG = debug
    response = Client().post("/api/nothing.here", {}, content_type="application/json")
    body = assert_json_error(response, 404, "not_found")
    assert "urlpatterns" not in body["message"] and "admin/" not in response.content.decode()


def test_a_wrong_method_answers_method_not_allowed_in_json(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.bob).client.get("/api/documents.list")
    assert_json_error(response, 405, "method_not_allowed")


def test_a_client_that_accepts_only_html_gets_not_acceptable_in_json(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.bob).post("documents.list", HTTP_ACCEPT="text/html")
    assert_json_error(response, 406, "not_acceptable")


def test_a_body_over_the_limit_answers_request_too_large(cast: Cast, api_for: ApiFor, settings: Settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api_for(cast.alice).post(
        "documents.create", {"title": "Big", "text": "x" * 5000, "collectionId": str(cast.handbook.id)}
    )
    assert_json_error(response, 413, "request_too_large")


@pytest.mark.parametrize("endpoint", ["documents.list", "documents.create", "collections.list", "apiKeys.list", "rag.search"])
def test_absurdly_nested_json_is_refused_as_a_bad_request_on_every_endpoint(cast: Cast, api_for: ApiFor, endpoint: str) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    response = api_for(cast.alice).client.post(f"/api/{endpoint}", nested, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"] in {"validation_error", "invalid_query"}


def test_malformed_json_is_refused_as_a_bad_request(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.alice).client.post("/api/documents.list", '{"limit": ', content_type="application/json")
    assert_json_error(response, 400, "validation_error")


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_exception_answers_server_error_in_json_and_logs_it_with_the_request_id(
    cast: Cast,
    api_for: ApiFor,
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    debug: bool,
) -> None:
    settings.DEBUG = debug

    def explode(**kwargs: Any) -> None:
        raise RuntimeError("the secret database password is hunter2")

    monkeypatch.setattr("documents.selectors.document_list", explode)
    api = api_for(cast.bob)
    api.client.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="cairn.request"):
        response = api.post("documents.list")
    body = assert_json_error(response, 500, "server_error")
    request_id = response["X-Request-ID"]
    assert request_id in body["message"] and "hunter2" not in response.content.decode()
    logged = [r for r in caplog.records if r.name == "cairn.request"]
    assert logged, "the failure is logged"
    record = logged[0]
    assert vars(record)["request_id"] == request_id and record.exc_text is not None and "hunter2" in record.exc_text


def test_every_response_carries_a_request_id_and_keeps_a_sane_one_the_client_sent(cast: Cast, api_for: ApiFor) -> None:
    api = api_for(cast.bob)
    ours = api.post("documents.list")["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", ours)
    assert api.post("documents.list", HTTP_X_REQUEST_ID="trace-1234abcd")["X-Request-ID"] == "trace-1234abcd"
    assert api.post("documents.list", HTTP_X_REQUEST_ID="<script>")["X-Request-ID"] != "<script>"


def test_every_error_code_is_in_the_api_docs_error_table() -> None:
    api_docs = (ROOT / "docs" / "api.md").read_text()
    codes = set(STATUS_CODES.values()) | {IdempotencyKeyReused.code} | {code for _, _, code in REFUSALS}
    codes |= {
        cls.code
        for cls in vars(config.errors).values()
        if isinstance(cls, type) and issubclass(cls, config.errors.ApplicationError)
    }
    missing = sorted(code for code in codes if f"| `{code}` |" not in api_docs)
    assert not missing, f"docs/api.md's error table lacks {missing}"


def test_the_root_redirects_to_the_rag_page(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/rag"


def test_swagger_ui_comes_from_the_project_not_a_cdn(client: Client, db: None) -> None:
    page = client.get("/api/schema/docs").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/static/") for s in sources), sources
    bundle = next(s for s in sources if s.endswith("swagger-ui-bundle.js"))
    response = client.get(bundle)
    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse), response
    assert b"".join(response.streaming_content)
