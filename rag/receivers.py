"""Signal receivers: they only enqueue, after the transaction commits."""

from __future__ import annotations

from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_migrate
from django.dispatch import receiver

from documents.signals import document_deleted, document_saved
from rag import tasks
from rag.indexing.keyword_postings import refresh_title
from rag.retrieval.vector_index import ensure_vector_index


@receiver(document_saved)
def queue_indexing(sender, document_id, content_changed: bool, **kwargs) -> None:
    if content_changed:
        transaction.on_commit(lambda: tasks.enqueue_index(document_id))
    else:
        transaction.on_commit(lambda: refresh_title(document_id))


@receiver(document_deleted)
def queue_removal(sender, document_id, **kwargs) -> None:
    transaction.on_commit(lambda: tasks.remove_document_task.delay(str(document_id)))


@receiver(post_migrate)
def create_vector_index(sender, using="default", **kwargs) -> None:
    if sender.name == "rag":
        ensure_vector_index(settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_DIMENSION)


@worker_ready.connect
def recover_on_worker_start(sender=None, **kwargs) -> None:
    """A worker that starts finishes what a dead one left: a full reconciliation, queued like any task."""
    tasks.reconcile_index_task.delay()
