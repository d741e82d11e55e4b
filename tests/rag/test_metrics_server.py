"""/metrics scraped over HTTP from gunicorn (two processes) beside a real Celery worker, after real traffic."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from permissions.models import TokenScope
from permissions.services import api_token_create
from rag.indexing.pipeline import index_documents
from rag.models import IndexState, IndexStatus
from tests.config.test_alert_rules import alert_rules, metric_names
from tests.factories import DocumentFactory
from tests.rag.indexing.test_worker import broker, wait_until, worker_factory  # noqa: F401  (fixtures)
from tests.rag.texts import OWLS, VOLCANO
from tests.servers import GunicornServer

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

METRICS_TOKEN = "scrape-token-0123456789abcdef"
Samples = dict[tuple[str, frozenset], float]


@pytest.fixture
def metrics_dir(tmp_path) -> Path:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    return directory


@pytest.fixture
def server(broker, test_broker, metrics_dir, tmp_path, settings):  # noqa: F811  (the broker fixture)
    """Production's shape: local settings, a broker, two gunicorn processes writing to one metrics directory, JSON logs."""
    server = GunicornServer(
        log_path=tmp_path / "gunicorn.log",
        workers=2,
        extra_env={
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "SECRET_KEY": settings.SECRET_KEY,  # the tokens the test issues must verify
            "CELERY_BROKER_URL": test_broker.celery_url,
            "REDIS_URL": "",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "METRICS_TOKEN": METRICS_TOKEN,
            "LOG_FORMAT": "json",
        },
    ).start()
    yield server
    server.stop()


def scrape(server: GunicornServer) -> Samples:
    # A new connection per scrape: either gunicorn process may answer, and both must report the same sums.
    response = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10)
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """A counter's value: one never incremented has no series yet, which is 0."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def gauge(samples: Samples, name: str, **labels: str) -> float:
    """A gauge's value: a gauge read at scrape time is always exported, so a missing series is a failure, not a 0."""
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} is missing from the scrape"
    return samples[key]


def pids_writing(metrics_dir: Path) -> set[str]:
    return {match.group(1) for f in metrics_dir.iterdir() if (match := re.search(r"_(\d+)\.db$", f.name))}


def indexed(ids: list[str]) -> bool:
    return IndexStatus.objects.filter(document_id__in=ids, state=IndexState.INDEXED).count() == len(ids)


def test_a_scrape_counts_the_queue_and_the_celery_workers_embeddings(cast, server, worker_factory, metrics_dir):  # noqa: F811
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 401, "no token, no metrics"
    token = api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext
    ids = []
    for i in range(3):
        response = httpx.post(
            f"{server.url}/api/documents.create",
            json={
                "title": f"Doc {i}",
                "text": f"# Doc {i}\n\nNotes about topic {i}.",
                "collectionId": str(cast.handbook.id),
                "publish": True,
            },
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        ids.append(response.json()["data"]["id"])

    waiting = scrape(server)
    assert gauge(waiting, "cairn_broker_up") == 1
    assert gauge(waiting, "cairn_queue_messages", queue="interactive") == 3, "one index task per edit, none consumed yet"
    assert gauge(waiting, "cairn_index_documents", model="fake-embedding", state="pending") == 3
    assert value(waiting, "cairn_provider_calls_total", kind="embedding", model="fake-embedding", outcome="ok") == 0

    worker_factory(PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)).start()
    wait_until(lambda: indexed(ids), 60, "the worker did not index the documents")
    wait_until(
        lambda: scrape(server).get(("cairn_queue_messages", frozenset({("queue", "interactive")}))) == 0,
        30,
        "the queue did not drain",
    )
    done = scrape(server)
    assert gauge(done, "cairn_broker_up") == 1, "an emptied queue is no broker down"
    assert gauge(done, "cairn_index_documents", model="fake-embedding", state="indexed") == 3
    # The web processes embedded nothing (no search yet): these calls are the Celery worker's, summed into the web's scrape.
    assert value(done, "cairn_provider_calls_total", kind="embedding", model="fake-embedding", outcome="ok") >= 1
    assert value(done, "cairn_provider_tokens_total", model="fake-embedding", direction="input") > 0
    assert len(pids_writing(metrics_dir)) >= 2, "the worker's and a web process's files"


def test_an_idle_broker_is_up_and_its_empty_queues_count_zero(server):
    idle = scrape(server)  # the broker fixture emptied Redis: the queue's key does not exist
    assert gauge(idle, "cairn_broker_up") == 1
    assert gauge(idle, "cairn_queue_messages", queue="interactive") == 0
    assert gauge(idle, "cairn_queue_messages", queue="bulk") == 0


# Prometheus' own series about each scrape, not /metrics'.
PROMETHEUS_SERIES = {"up"}


def exported_names(server: GunicornServer) -> set[str]:
    """Every series name a scrape exports (a histogram's _bucket, _count and _sum, a counter's _total)."""
    response = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10)
    return {sample.name for family in text_string_to_metric_families(response.text) for sample in family.samples}


def test_the_alert_rules_read_only_metrics_a_scrape_exports(cast, server, worker_factory, metrics_dir):  # noqa: F811
    token = api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext
    response = httpx.post(
        f"{server.url}/api/documents.create",
        json={"title": "Owls", "text": "# Owls\n\nOwls hunt at night.", "collectionId": str(cast.handbook.id), "publish": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    # A worker's task and embedding, so the series its processes write exist too.
    worker_factory(PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)).start()
    wait_until(lambda: indexed([response.json()["data"]["id"]]), 60, "the worker did not index the document")
    wait_until(lambda: "cairn_tasks_total" in exported_names(server), 30, "the worker's finished task was not counted")
    exported = exported_names(server) | PROMETHEUS_SERIES
    for rule in alert_rules():
        assert metric_names(rule["expr"]) <= exported, f"{rule['alert']} reads {metric_names(rule['expr']) - exported}"


def search(server: GunicornServer, token: str, body: dict, request_id: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **({"X-Request-ID": request_id} if request_id else {})}
    return httpx.post(f"{server.url}/api/rag.search", json=body, headers=headers, timeout=30)


def test_traffic_moves_the_request_and_search_metrics_and_logs_json(cast, server):
    documents = [
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Volcanoes", text=VOLCANO),
    ]
    index_documents(document_ids=[d.pk for d in documents])
    token = api_token_create(user=cast.bob).plaintext
    before = scrape(server)
    for query in ("what do owls hunt", "when do volcanoes erupt", "where do owls nest"):
        assert search(server, token, {"query": query}).status_code == 200
    found = search(server, token, {"query": "owls", "mode": "keyword"}, request_id="metrics-test-request-1").json()["data"]
    assert search(server, token, {"query": "zebrafish", "mode": "keyword"}).json()["data"] == []
    assert search(server, token, {"query": "x"}).status_code == 400
    assert (
        httpx.post(f"{server.url}/api/rag.nothing", headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 404
    )
    after, again = scrape(server), scrape(server)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "cairn_http_request_duration_seconds_count"
    assert moved(requests, method="POST", endpoint="/api/rag.search", status="2xx") == 5, "searches answered"
    assert moved(requests, method="POST", endpoint="/api/rag.search", status="4xx") == 1, "the refused search"
    assert moved(requests, method="POST", endpoint="unmatched", status="4xx") == 1, "the unknown route"
    assert value(again, requests, method="POST", endpoint="/api/rag.search", status="2xx") == value(
        after, requests, method="POST", endpoint="/api/rag.search", status="2xx"
    ), "each scrape sums both gunicorn processes, whichever answers it"
    stages = "cairn_search_stage_duration_seconds_count"
    assert moved(stages, mode="hybrid", stage="embed") == 3
    assert moved(stages, mode="keyword", stage="keyword") == 2
    assert moved(stages, mode="keyword", stage="embed") == 0, "keyword search embeds nothing"
    assert moved("cairn_search_duration_seconds_count", mode="hybrid") == 3
    assert moved("cairn_search_zero_results_total", mode="keyword") == 1
    assert moved("cairn_provider_calls_total", kind="embedding", model="fake-embedding", outcome="ok") == 3, "one per new query"
    assert moved("cairn_provider_tokens_total", model="fake-embedding", direction="input") > 0

    lines = [line for line in server.log_path.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line, gunicorn's own included, is one JSON object
    logged = next(e for e in entries if e["logger"] == "rag.search" and e["request_id"] == "metrics-test-request-1")
    assert {k: logged[k] for k in ("level", "search_mode", "results")} == {
        "level": "INFO",
        "search_mode": "keyword",
        "results": len(found),
    }
