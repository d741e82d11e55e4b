"""Index gauges read at scrape time: documents per index state, and the tasks waiting in the broker's queue."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from config.celery import app as celery_app
from rag.models import IndexState, IndexStatus

logger = logging.getLogger(__name__)


def index_state_counts(model_id: str) -> dict[str, int]:
    """Documents (not deleted) in each index state of `model_id`, every state present."""
    counts = dict.fromkeys(IndexState.values, 0)
    rows = (
        IndexStatus.objects.filter(model_id=model_id, document__deleted_at__isnull=True)
        .values_list("state")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts.update(dict(rows))
    return counts


def queue_length(queue: str) -> int:
    """Messages waiting in the broker's `queue` (kombu counts Redis' priority sub-queues too); raises if it is unreachable."""
    with celery_app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=0, timeout=2)
        return connection.default_channel.queue_declare(queue=queue, passive=True).message_count


class IndexCollector(Collector):
    """`cairn_index_documents{model,state}`, `cairn_queue_messages{queue}` and `cairn_broker_up`, computed at each scrape."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        model_id = settings.RAG_EMBEDDING_MODEL
        documents = GaugeMetricFamily(
            "cairn_index_documents",
            "Documents in each index state for the configured embedding model.",
            labels=["model", "state"],
        )
        for state, count in index_state_counts(model_id).items():
            documents.add_metric([model_id, state], count)
        yield documents
        if settings.CELERY_TASK_ALWAYS_EAGER:
            return  # no broker: tasks run in-process and nothing waits
        queue = celery_app.conf.task_default_queue
        up = GaugeMetricFamily("cairn_broker_up", "1 when the scrape could read the broker's queue, else 0.")
        try:
            waiting = queue_length(queue)
        except Exception as exc:  # a scrape reports the broker down, it never fails for it
            logger.warning("metrics: cannot read the length of queue %s: %s", queue, exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        messages = GaugeMetricFamily(
            "cairn_queue_messages", "Tasks waiting in the broker's queue (indexing, imports, reconciliation).", labels=["queue"]
        )
        messages.add_metric([queue], waiting)
        yield messages
