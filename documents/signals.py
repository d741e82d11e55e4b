"""Signals the documents app sends; the rag app listens and enqueues indexing work.

Sent from inside the service's transaction; receivers must defer real work with
`transaction.on_commit` so nothing runs against uncommitted data.
"""

from __future__ import annotations

from django.dispatch import Signal

# kwargs: document_id, content_changed (bool)
document_saved = Signal()
# kwargs: document_id
document_deleted = Signal()
