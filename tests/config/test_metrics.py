"""/metrics in-process: who may read it, what its labels are, and the JSON log format."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pytest_django import Settings

from config.logs import JsonFormatter
from config.middleware import RequestIdFilter
from permissions.services import api_token_create
from tests.conftest import Cast

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-token-0123456789"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def request_count(text: str, endpoint: str, status: str, method: str = "GET") -> float:
    key = (
        "cairn_http_request_duration_seconds_count",
        frozenset({"endpoint": endpoint, "status": status, "method": method}.items()),
    )
    return samples(text).get(key, 0.0)


@pytest.fixture
def open_metrics(settings: Settings) -> None:
    settings.METRICS_ENABLED, settings.METRICS_TOKEN = True, ""


@pytest.fixture
def token_metrics(settings: Settings) -> None:
    settings.METRICS_ENABLED, settings.METRICS_TOKEN = True, TOKEN


@pytest.mark.django_db
def test_metrics_are_not_found_when_disabled(settings: Settings, client: Client) -> None:
    settings.METRICS_ENABLED = False
    assert client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_metrics_are_served_without_a_token_when_enabled_and_none_is_set(open_metrics: None, client: Client) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")


@pytest.mark.django_db
def test_metrics_without_the_token_are_unauthorized(token_metrics: None, client: Client) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'


@pytest.mark.django_db
def test_metrics_with_a_wrong_token_are_unauthorized(token_metrics: None, client: Client) -> None:
    assert client.get("/metrics", headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"}).status_code == 401


@pytest.mark.django_db
def test_metrics_with_an_api_token_instead_are_unauthorized(token_metrics: None, client: Client, cast: Cast) -> None:
    api_token = api_token_create(user=cast.alice, scope="read").plaintext
    assert client.get("/metrics", headers={"Authorization": f"Bearer {api_token}"}).status_code == 401


@pytest.mark.django_db
def test_metrics_with_the_token_are_served(token_metrics: None, client: Client) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


@pytest.mark.django_db
def test_metrics_accept_only_safe_methods(open_metrics: None, client: Client) -> None:
    assert client.post("/metrics").status_code == 405


def metrics_settings(**env: str) -> subprocess.CompletedProcess[str]:
    script = "from django.conf import settings; print(settings.METRICS_ENABLED)"
    environment = {**os.environ, "SECRET_KEY": "x" * 50, "DATABASE_URL": "postgres://x@127.0.0.1:1/x", **env}
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({"DJANGO_SETTINGS_MODULE": "config.settings.production"}, "False"),
        ({"DJANGO_SETTINGS_MODULE": "config.settings.production", "METRICS_TOKEN": TOKEN}, "True"),
        ({"DJANGO_SETTINGS_MODULE": "config.settings.local", "DEBUG": "true"}, "True"),
        ({"DJANGO_SETTINGS_MODULE": "config.settings.local", "DEBUG": "true", "METRICS_ENABLED": "false"}, "False"),
    ],
)
def test_metrics_are_on_by_default_only_with_debug_or_a_token(env: dict[str, str], enabled: str) -> None:
    result = metrics_settings(**env)
    assert result.stdout.strip() == enabled, result.stderr


def test_a_short_metrics_token_stops_start_up() -> None:
    result = metrics_settings(DJANGO_SETTINGS_MODULE="config.settings.local", METRICS_TOKEN="short")
    assert "METRICS_TOKEN must be at least 16 characters" in result.stderr


@pytest.mark.django_db
def test_a_request_is_labelled_by_its_route_pattern_not_its_path(open_metrics: None, client: Client) -> None:
    before = client.get("/metrics").content.decode()
    client.get(f"/doc/{uuid.uuid4()}")
    after = client.get("/metrics").content.decode()
    # Signed out: a redirect to the sign-in page.
    assert request_count(after, "/doc/<uuid:document_id>", "3xx") == request_count(before, "/doc/<uuid:document_id>", "3xx") + 1


@pytest.mark.django_db
def test_an_unknown_path_is_labelled_unmatched(open_metrics: None, client: Client) -> None:
    before = request_count(client.get("/metrics").content.decode(), "unmatched", "4xx", "POST")
    client.post(f"/api/no.such.{uuid.uuid4().hex}")
    after = request_count(client.get("/metrics").content.decode(), "unmatched", "4xx", "POST")
    assert after == before + 1


@pytest.mark.django_db
def test_index_states_are_counted_at_scrape_time(open_metrics: None, client: Client, cast: Cast) -> None:
    from rag.indexing.pipeline import index_documents
    from tests.factories import DocumentFactory

    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text="Owls hunt at night.")
    index_documents(document_ids=[document.pk])
    values = samples(client.get("/metrics").content.decode())
    assert values[("cairn_index_documents", frozenset({"model": "fake-embedding", "state": "indexed"}.items()))] == 1


def json_line(message: str, *args: object, **extra: object) -> dict[str, Any]:
    record = logging.LogRecord("rag.search", logging.INFO, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    RequestIdFilter().filter(record)
    return json.loads(JsonFormatter().format(record))


def test_a_json_log_line_has_the_standard_fields() -> None:
    line = json_line("found %d", 3)
    assert {k: line[k] for k in ("level", "logger", "message", "request_id")} == {
        "level": "INFO",
        "logger": "rag.search",
        "message": "found 3",
        "request_id": "-",
    }


def test_a_json_log_line_keeps_extra_fields_and_writes_what_json_cannot_hold_as_text() -> None:
    some_id = uuid.uuid4()
    assert json_line("x", results=0, document=some_id)["document"] == str(some_id)


def test_a_json_log_line_carries_the_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    assert "ValueError: boom" in json.loads(JsonFormatter().format(record))["exception"]


@pytest.fixture
def unreachable_broker(settings: Settings, tmp_path: Path) -> Iterator[None]:
    """The app pointed at a Redis socket nobody listens on."""
    from config.celery import app

    previous = (app.conf.broker_url, app.conf.task_always_eager)
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=f"redis+socket://{tmp_path / 'nobody.sock'}", task_always_eager=False)
    app._pool = None
    yield
    app.conf.update(broker_url=previous[0], task_always_eager=previous[1])
    app._pool = None


@pytest.mark.django_db
def test_an_unreachable_broker_is_reported_down_and_the_scrape_still_answers(
    open_metrics: None, unreachable_broker: None, client: Client
) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    values = samples(response.content.decode())
    assert values[("cairn_broker_up", frozenset())] == 0
    assert not [key for key in values if key[0] == "cairn_queue_messages"], "no queue length is known"


@pytest.mark.django_db
def test_the_longest_wait_for_indexing_is_exported(open_metrics: None, client: Client, cast: Cast) -> None:
    from django.utils import timezone

    from rag.models import IndexState, IndexStatus
    from tests.factories import DocumentFactory

    key = ("cairn_index_oldest_waiting_seconds", frozenset({"model": "fake-embedding"}.items()))
    assert samples(client.get("/metrics").content.decode())[key] == 0, "nothing waits"
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text="Owls hunt.")
    IndexStatus.objects.update_or_create(
        document=document,
        model_id="fake-embedding",
        defaults={"state": IndexState.PENDING, "updated_at": timezone.now() - timedelta(hours=1)},
    )
    assert samples(client.get("/metrics").content.decode())[key] >= 3600
