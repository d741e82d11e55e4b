"""Where a document's current version stands in the search index, as the document page shows it.

Indexing happens in the rag app, which documents may not import: rag registers the reader at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from documents.models import Document

IndexState = Literal["pending", "indexed", "failed"]
# None: search is switched off, so nothing indexes the document and there is nothing to show.
IndexStateReader = Callable[[Document], IndexState | None]
_reader: IndexStateReader | None = None


def register_index_state_reader(reader: IndexStateReader) -> None:
    global _reader
    _reader = reader


def index_state(document: Document) -> IndexState | None:
    """`pending` until the current version is searchable, then `indexed` (or `failed`); None when nothing indexes."""
    return _reader(document) if _reader is not None else None
