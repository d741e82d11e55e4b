"""Signal receivers: they only enqueue, after the transaction commits, or renew a team's cache token."""

from __future__ import annotations

import logging
from contextvars import ContextVar

from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save
from django.dispatch import receiver

from documents.models import Collection, CollectionMembership, Document, DocumentMembership
from documents.signals import bulk_changes_ended, document_deleted, document_saved, in_bulk
from permissions.models import Group, GroupMembership
from rag import tasks
from rag.corpus.cache_token import team_changed
from rag.corpus.milvus import milvus_enabled, set_outbox_triggers
from rag.corpus.vector_index import ensure_vector_index
from rag.indexing.pipeline import title_changed

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
        if in_bulk():  # read now: the commit may come after the batch's block
            _after_commit("indexing", document_id, lambda: _gather_for_indexing(document_id))
        else:
            _after_commit("indexing", document_id, lambda: tasks.enqueue_index(document_id))


# A batch's documents (an import's, a sync's) are queued for indexing REINDEX_BATCH at a time as their saves
# commit, and the rest when the batch ends: a task per document embedded a few chunks at a time and paid a
# task's and a transaction's overhead for each, so a 1,000-file import indexed at 0.58 of the pipeline's rate.
_gathered: ContextVar[list[str] | None] = ContextVar("rag_gathered_for_indexing", default=None)


def _gather_for_indexing(document_id) -> None:
    gathered = _gathered.get()
    if gathered is None:
        gathered = []
        _gathered.set(gathered)
    gathered.append(str(document_id))
    if len(gathered) >= tasks.REINDEX_BATCH:
        _queue_gathered()


def _queue_gathered() -> None:
    gathered = _gathered.get()
    if gathered:
        batch = gathered[:]
        gathered.clear()
        tasks.enqueue_bulk_index(batch)


@receiver(bulk_changes_ended)
def queue_gathered_indexing(sender, **kwargs) -> None:
    """The batch is over: queue what it gathered, once the transaction it ended in (if any) commits, after the
    saves' own callbacks, which run first, in the order they were registered."""

    def run() -> None:
        try:
            _queue_gathered()
        except Exception:
            logger.exception("could not queue a batch's documents for indexing; recovery will queue them again")

    transaction.on_commit(run)


@receiver(document_deleted)
def queue_removal(sender, document_id, **kwargs) -> None:
    if settings.RAG_ENABLED:
        bulk = in_bulk()
        _after_commit("removal", document_id, lambda: tasks.enqueue_removal(document_id, bulk=bulk))


@receiver(post_migrate)
def create_vector_index(sender, using="default", **kwargs) -> None:
    if sender.name == "rag":
        ensure_vector_index(settings.RAG_EMBEDDING_MODEL, settings.RAG_EMBEDDING_DIMENSION)
        if settings.RAG_EMBEDDING_FALLBACK_MODEL:
            ensure_vector_index(settings.RAG_EMBEDDING_FALLBACK_MODEL, settings.RAG_EMBEDDING_FALLBACK_DIMENSION)
        # The outbox triggers run only for the milvus backend; switched on here, the first reconciliation copies
        # what was written before (docs/operations.md, the Milvus vector backend).
        set_outbox_triggers(enabled=milvus_enabled())


@worker_ready.connect
def recover_on_worker_start(sender=None, **kwargs) -> None:
    """A worker that starts finishes what a dead one left: a full reconciliation, queued like any task."""
    tasks.reconcile_index_task.delay()


# Who may read what, and what there is to read: any save or delete of these gives the team a new
# cache token (rag.corpus.cache_token), so no cached answer outlives it. Model signals rather than
# the services' own, so the admin, imports and the shell are covered too.


@receiver([post_save, post_delete], sender=Document, dispatch_uid="rag.cache_token.document")
@receiver([post_save, post_delete], sender=Collection, dispatch_uid="rag.cache_token.collection")
@receiver([post_save, post_delete], sender=Group, dispatch_uid="rag.cache_token.group")
def team_content_changed(sender, instance, **kwargs) -> None:
    team_changed(instance.team_id)


@receiver([post_save, post_delete], sender=CollectionMembership, dispatch_uid="rag.cache_token.collection_membership")
def collection_membership_changed(sender, instance, **kwargs) -> None:
    # The collection may be going in the same delete; its own signal then renews the token.
    team_changed(Collection.objects.filter(pk=instance.collection_id).values_list("team_id", flat=True).first())


@receiver([post_save, post_delete], sender=DocumentMembership, dispatch_uid="rag.cache_token.document_membership")
def document_membership_changed(sender, instance, **kwargs) -> None:
    team_changed(Document.objects.filter(pk=instance.document_id).values_list("team_id", flat=True).first())


@receiver([post_save, post_delete], sender=GroupMembership, dispatch_uid="rag.cache_token.group_membership")
def group_membership_changed(sender, instance, **kwargs) -> None:
    team_changed(Group.objects.filter(pk=instance.group_id).values_list("team_id", flat=True).first())


@receiver(m2m_changed, sender=GroupMembership, dispatch_uid="rag.cache_token.group_members")
def group_members_changed(sender, instance, action: str, reverse: bool, pk_set, **kwargs) -> None:
    """`group.members.add(...)` and the like write GroupMembership rows without saving them one by one."""
    if action.startswith("post_"):
        teams = (
            {instance.team_id}
            if not reverse or not pk_set
            else set(Group.objects.filter(pk__in=pk_set).values_list("team_id", flat=True))
        )
        for team_id in teams:
            team_changed(team_id)
