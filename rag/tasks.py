"""Celery tasks: take ids, call one service. Idempotent, so a redelivered task is harmless."""
from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from rag import indexing

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def index_document_task(document_id: str, force: bool = False) -> dict:
    result = indexing.index_documents(document_ids=[document_id], force=force)
    return {"indexed": len(result.indexed), "failed": len(result.failed)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def index_batch_task(document_ids: list[str], job_id: str | None = None, force: bool = False) -> dict:
    result = indexing.index_documents(document_ids=document_ids, force=force)
    if job_id:
        indexing.job_record(job_id=job_id, done=len(document_ids) - len(result.failed), failed=len(result.failed))
    return {"indexed": len(result.indexed), "failed": len(result.failed)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def remove_document_task(document_id: str) -> None:
    indexing.remove_document_chunks(document_ids=[document_id])


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reconcile_index_task() -> dict:
    from rag.reconcile import reconcile

    return reconcile(fix=True).as_dict()


def enqueue_index(document_id, *, force: bool = False) -> None:
    """Queue indexing of one document unless a queued task will already pick up its latest version."""
    if indexing.request_index(document_id=document_id, model_id=settings.RAG_EMBEDDING_MODEL) or force:
        index_document_task.delay(str(document_id), force)
