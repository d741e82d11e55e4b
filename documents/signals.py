"""Signals the documents app sends; the rag app listens and enqueues indexing work.

Sent from inside the service's transaction; receivers must defer real work with
`transaction.on_commit` so nothing runs against uncommitted data. Changes made inside
`bulk_changes()` are one of many (an import, a collection's delete): `in_bulk()` tells
receivers to queue their work where it does not hold up one person's edit, and `bulk_changes_ended`
tells them the batch is over, so work they gathered from it can go.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.dispatch import Signal

# kwargs: document_id, content_changed (bool)
document_saved = Signal()
# kwargs: document_id
document_deleted = Signal()
# No kwargs: sent when a `bulk_changes()` block ends (however it ends), inside the transaction it ends in, if any.
bulk_changes_ended = Signal()

_bulk: ContextVar[bool] = ContextVar("documents_bulk_changes", default=False)


@contextmanager
def bulk_changes() -> Iterator[None]:
    """The documents saved or deleted inside are part of a batch: their indexing waits in the bulk queue."""
    token = _bulk.set(True)
    try:
        yield
    finally:
        _bulk.reset(token)
        bulk_changes_ended.send(sender=None)


def in_bulk() -> bool:
    return _bulk.get()
