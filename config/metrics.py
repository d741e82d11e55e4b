"""Prometheus metrics: their definitions, the request middleware, and the protected `/metrics` view.

Every layer records into the metrics defined here (config imports no app, so any module may import
this one). Under gunicorn's several processes, and beside the Celery worker's, prometheus_client
runs in multiprocess mode: `PROMETHEUS_MULTIPROC_DIR` (set by `make run`'s supervisor for all its
children, before any of them imports prometheus_client) holds one file per process and metric
type, and a scrape sums the files of every process. Without it a process serves its own registry.

Gauges are not kept in processes at all (multiprocess mode would need a mode per gauge and a
clean-up when a worker dies): what is a state rather than a count — documents per index state,
tasks waiting in the queue — is read at scrape time by the collectors registered with
`register_scrape_collector` (`BrokerCollector` by config.celery, the apps' own), so every scrape sees the database and broker as
they are. The alert rules that read these metrics ship in deploy/prometheus/alerts.yml.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from config.broker import queue_length, queue_names

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)

# Request and search latencies: a search answers in tens of milliseconds, an answer in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

HTTP_REQUEST_SECONDS = Histogram(
    "cairn_http_request_duration_seconds",
    "Time from a request's arrival to its response (to the first event of a stream), by route pattern and status class.",
    ["method", "endpoint", "status"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_SECONDS = Histogram(
    "cairn_search_duration_seconds",
    "Whole searches (rag.search, answers' retrieval, MCP), by mode.",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_STAGE_SECONDS = Histogram(
    "cairn_search_stage_duration_seconds",
    "Stages of a search (scope, embed, vector, keyword, keyword_wait, graph, fuse, load), by mode.",
    ["mode", "stage"],
    buckets=STAGE_BUCKETS,
)
SEARCH_ZERO_RESULTS = Counter("cairn_search_zero_results_total", "Searches that found nothing, by mode.", ["mode"])
PROVIDER_CALLS = Counter(
    "cairn_provider_calls_total",
    "Calls to the embedding, LLM and rerank providers (retries included in the call), by outcome: ok, transient_error, permanent_error.",
    ["kind", "model", "outcome"],
)
PROVIDER_CALL_SECONDS = Histogram(
    "cairn_provider_call_duration_seconds",
    "Duration of provider calls (for a streamed answer, until its last piece), by kind and model.",
    ["kind", "model"],
    buckets=LATENCY_BUCKETS,
)
PROVIDER_RETRIES = Counter(
    "cairn_provider_retries_total", "Transient provider failures retried, by kind and model.", ["kind", "model"]
)
PROVIDER_TOKENS = Counter(
    "cairn_provider_tokens_total",
    "Tokens the providers reported using (input and output), by model, when they report it (the local model does not).",
    ["model", "direction"],
)

TASKS = Counter(
    "cairn_tasks_total",
    "Celery tasks a worker finished, by task and outcome (Celery's state: success, failure, retry, ...).",
    ["task", "outcome"],
)

KIND_EMBEDDING, KIND_LLM, KIND_RERANK, KIND_GRAPH_LLM = "embedding", "llm", "rerank", "graph_llm"


def status_class(status: int) -> str:
    return f"{status // 100}xx"


# Set while a server does work of its own that no user asked for (a warm-up search): searches and provider calls
# made then are not counted, so the metrics describe the users' traffic only.
_unrecorded: ContextVar[bool] = ContextVar("cairn_metrics_unrecorded", default=False)


@contextmanager
def unrecorded() -> Iterator[None]:
    token = _unrecorded.set(True)
    try:
        yield
    finally:
        _unrecorded.reset(token)


@contextmanager
def provider_call(kind: str, model: str) -> Iterator[None]:
    """Count and time one provider call; a ProviderError's `transient` flag names the failure's kind."""
    started = time.perf_counter()
    outcome = "ok"
    try:
        yield
    except Exception as exc:
        outcome = "transient_error" if getattr(exc, "transient", False) else "permanent_error"
        raise
    finally:
        if not _unrecorded.get():
            PROVIDER_CALL_SECONDS.labels(kind, model).observe(time.perf_counter() - started)
            PROVIDER_CALLS.labels(kind, model, outcome).inc()


# Where the calls made while it is set add their tokens (one answer's generation: its metadata's token counts).
_token_usage: ContextVar[TokenUsage | None] = ContextVar("cairn_token_usage", default=None)


@dataclass
class TokenUsage:
    prompt: int = 0
    completion: int = 0


def record_tokens(model: str, *, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
    if input_tokens:
        PROVIDER_TOKENS.labels(model, "input").inc(input_tokens)
    if output_tokens:
        PROVIDER_TOKENS.labels(model, "output").inc(output_tokens)
    usage = _token_usage.get()
    if usage is not None:
        usage.prompt += input_tokens or 0
        usage.completion += output_tokens or 0


def counting_tokens(pieces: Iterator[str], usage: TokenUsage) -> Iterator[str]:
    """`pieces`, the tokens of the calls made while each is produced added to `usage`.

    Set around each step rather than the whole stream: a generator runs in its consumer's context,
    which may differ from one step to the next.
    """
    while True:
        token = _token_usage.set(usage)
        try:
            piece = next(pieces)
        except StopIteration:
            return
        finally:
            _token_usage.reset(token)
        yield piece


def record_search(mode: str, *, stages_ms: dict[str, float], total_ms: float, results: int) -> None:
    """One search: its stage latencies (milliseconds per `<stage>_ms`, as `SearchResult.latency`), its whole, and whether it found anything."""
    if _unrecorded.get():
        return
    for name, ms in stages_ms.items():
        SEARCH_STAGE_SECONDS.labels(mode, name.removesuffix("_ms")).observe(ms / 1000)
    SEARCH_SECONDS.labels(mode).observe(total_ms / 1000)
    if not results:
        SEARCH_ZERO_RESULTS.labels(mode).inc()


def _endpoint(request: HttpRequest) -> str:
    """The route pattern (`/api/rag.search`, `/doc/<uuid:document_id>`), never the raw path, so no id becomes a label."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return "/" + match.route
    if request.path.startswith("/" + settings.STATIC_URL.lstrip("/")):
        return "static"
    return "unmatched"


class MetricsMiddleware:
    """Times every request into `cairn_http_request_duration_seconds` (inside the request-id middleware, so its 500s count)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        status = 500
        try:
            response = self.get_response(request)
            status = response.status_code
            return response
        finally:
            HTTP_REQUEST_SECONDS.labels(request.method or "-", _endpoint(request), status_class(status)).observe(
                time.perf_counter() - started
            )


class BrokerCollector(Collector):
    """`cairn_broker_up` and `cairn_queue_messages{queue}`, read from `app`'s broker at each scrape (nothing without one)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if settings.CELERY_TASK_ALWAYS_EAGER:
            return  # no broker: tasks run in-process and nothing waits
        app = self.app
        up = GaugeMetricFamily("cairn_broker_up", "1 when the scrape reached the broker, else 0.")
        try:
            waiting = {queue: queue_length(app, queue) for queue in queue_names(app)}
        except Exception as exc:  # a scrape reports the broker down, it never fails for it
            logger.warning("metrics: cannot reach the broker to read its queues: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        messages = GaugeMetricFamily(
            "cairn_queue_messages",
            "Tasks waiting in each of the broker's queues (interactive: edits; bulk: imports, backfills, reconciliation).",
            labels=["queue"],
        )
        for queue, count in waiting.items():
            messages.add_metric([queue], count)
        yield messages


_scrape_collectors: list[Collector] = []


def register_scrape_collector(collector: Collector) -> None:
    """Add a collector read at each scrape (an app's gauges computed from the database or the broker)."""
    if collector not in _scrape_collectors:
        _scrape_collectors.append(collector)


def scrape_registry() -> CollectorRegistry:
    """What one scrape exposes: every process's metrics (multiprocess mode) or this process's, then the scrape-time gauges."""
    # auto_describe off: collectors are not described up front, so the registries below nest without name checks.
    registry = CollectorRegistry(auto_describe=False)
    if settings.PROMETHEUS_MULTIPROC_DIR:
        multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        registry.register(REGISTRY)
    for collector in _scrape_collectors:
        registry.register(collector)
    return registry


def _authorised(request: HttpRequest) -> bool:
    if not settings.METRICS_TOKEN:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), settings.METRICS_TOKEN.encode())


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics in Prometheus' text format: 404 unless METRICS_ENABLED, 401 without METRICS_TOKEN when one is set."""
    if not settings.METRICS_ENABLED:
        raise Http404("Metrics are disabled.")
    if not _authorised(request):
        response = HttpResponse("A metrics token is required: Authorization: Bearer <METRICS_TOKEN>.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
