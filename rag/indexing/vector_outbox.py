"""The outbox drain: what the chunk writes left in rag_vector_outbox, carried into Milvus (RAG_VECTOR_BACKEND=milvus).

Each outbox row only names a chunk. The drain reads the chunk's current row (its vector, version, document, the
document's collection and team) and upserts it, or deletes it from Milvus when the chunk is gone; then it deletes
the outbox rows it carried out, in the transaction that read them. So the rows' order does not matter, a pass
that fails (Milvus down) leaves them for the next, and a pass repeated does no harm. One pass runs at a time (an
advisory lock): two passes reading a chunk before and after a change could otherwise write the older state last.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from django.db import connection, transaction

from rag.corpus import milvus

logger = logging.getLogger("rag.indexing")

# The advisory lock's key: any number no other lock of this database uses.
DRAIN_LOCK = 0x6D696C76  # "milv"
BATCH = 2000


def outbox_drain(*, batch: int = BATCH, max_batches: int | None = None, max_seconds: float | None = None) -> int:
    """Carry the outbox into Milvus until it is empty (or `max_batches` passes, or the first pass that ends after
    `max_seconds`); how many outbox rows were carried out.

    With the pgvector backend there is nothing to copy to: the triggers are switched off and the outbox emptied.
    """
    if not milvus.milvus_enabled():
        milvus.set_outbox_triggers(enabled=False)
        return 0
    milvus.set_outbox_triggers(enabled=True)
    done = 0
    passes = 0
    started = time.monotonic()
    while max_batches is None or passes < max_batches:
        carried = _drain_batch(batch)
        if carried is None:
            break  # another pass holds the lock: it carries on
        done += carried
        passes += 1
        if carried < batch or (max_seconds is not None and time.monotonic() - started >= max_seconds):
            break
    return done


def _drain_batch(batch: int) -> int | None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [DRAIN_LOCK])
        if not cursor.fetchone()[0]:
            return None
        cursor.execute("SELECT id, chunk_id FROM rag_vector_outbox ORDER BY id LIMIT %s", [batch])
        rows = cursor.fetchall()
        if not rows:
            return 0
        chunk_ids = sorted({chunk_id for _, chunk_id in rows})
        cursor.execute(
            "SELECT e.id, e.team_id::text, d.collection_id::text, e.document_id::text, e.document_version, e.model_id,"
            " vector_dims(e.embedding), e.embedding::real[]"
            " FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id WHERE e.id = ANY(%s)",
            [chunk_ids],
        )
        by_model: dict[tuple[str, int], list[milvus.VectorRow]] = defaultdict(list)
        present: set[int] = set()
        for pk, team, collection, document, version, model_id, dimension, embedding in cursor.fetchall():
            present.add(pk)
            by_model[(model_id, dimension)].append(
                milvus.VectorRow(pk, team, collection, document, int(version), model_id, embedding)
            )
        for (model_id, dimension), vectors in by_model.items():
            milvus.upsert(model_id=model_id, dimension=dimension, rows=vectors)
        gone = [pk for pk in chunk_ids if pk not in present]
        if gone:
            milvus.delete(chunk_ids=gone)
        cursor.execute("DELETE FROM rag_vector_outbox WHERE id = ANY(%s)", [[pk for pk, _ in rows]])
        logger.info("vector outbox: %d chunk(s) copied to Milvus, %d deleted", len(present), len(gone))
        return len(rows)


def outbox_enqueue(chunk_ids: list[int]) -> None:
    """Ask the drain to carry these chunks again (reconciliation's repair): their current state, or their deletion."""
    if not chunk_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO rag_vector_outbox (chunk_id, created_at) SELECT unnest(%s::bigint[]), now()", [chunk_ids])


def outbox_backlog() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM rag_vector_outbox")
        return int(cursor.fetchone()[0])
