"""Signal receivers: they only enqueue, after the transaction commits."""

from __future__ import annotations

import logging

from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_migrate
from django.dispatch import receiver

from documents.signals import document_deleted, document_saved
from rag import tasks
from rag.indexing.pipeline import title_changed
from rag.retrieval.vector_index import ensure_vector_index

logger = logging.getLogger("rag.indexing")


def _after_commit(what: str, document_id, action) -> None:
    """Run `action` once the save commits; if the broker cannot take it, the save still stands.

    The client already has its document: a broker that is down must not turn that into an error.
    The document stays unindexed (or its chunks in place) until the recovery pass or reconciliation
    queues it again (rag.tasks.recover_index, every RAG_RECOVER_INTERVAL seconds).
    """

    def run() -> None:
        try:
            action()
        except Exception:
            logger.exception("could not queue %s of document %s; recovery will queue it again", what, document_id)

    transaction.on_commit(run)


# With RAG_ENABLED=false nothing is queued: the document's chunks stay as they were (out of sight, as
# every reader of them is switched off) until the feature is on again, when the reconciliation every
# starting worker runs finds the documents that changed meanwhile missing, stale or deleted.


@receiver(document_saved)
def queue_indexing(sender, document_id, content_changed: bool, **kwargs) -> None:
    if not content_changed:
        # Queued nowhere and no embedding: the chunks take a new title at once, so one made while the
        # feature is off is in place when it comes back on (the reconciliation cannot see a title).
        _after_commit("a title refresh", document_id, lambda: title_changed(document_id))
    elif settings.RAG_ENABLED:
        _after_commit("indexing", document_id, lambda: tasks.enqueue_index(document_id))


@receiver(document_deleted)
def queue_removal(sender, document_id, **kwargs) -> None:
    if settings.RAG_ENABLED:
        _after_commit("removal", document_id, lambda: tasks.remove_document_task.delay(str(document_id)))


@receiver(post_migrate)
def create_vector_index(sender, using="default", **kwargs) -> None:
    if sender.name == "rag":
        ensure_vector_index(settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_DIMENSION)


@worker_ready.connect
def recover_on_worker_start(sender=None, **kwargs) -> None:
    """A worker that starts finishes what a dead one left: a full reconciliation, queued like any task."""
    tasks.reconcile_index_task.delay()
