"""The Milvus vector backend's store (RAG_VECTOR_BACKEND=milvus): one Milvus collection per embedding model.

PostgreSQL stays the source of truth: chunks, their text and vectors, and the access policy live there. Milvus
holds a copy of every chunk's vector with the scalar fields a search filters on (team as the partition key,
collection, document, document version, model), written from the outbox (rag.indexing.vector_outbox) and
repaired by reconciliation. Search sends the viewer's compiled scope as a filter expression and checks every
hit against PostgreSQL's visible set again (rag.retrieval.vector).
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

if TYPE_CHECKING:
    from pymilvus import MilvusClient

# Milvus's largest top-k (limit + offset) for one search.
MAX_TOP_K = 16_384
# HNSW as pgvector builds it by default (m 16, ef_construction 64), so the two backends' figures compare.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
# The fields every chunk's row carries beside its vector; `team` is the partition key.
SCALARS = ("team", "collection", "document", "version", "model")
_OUTBOX_TRIGGERS = (
    ("document_embeddings", "rag_vector_outbox_insert"),
    ("document_embeddings", "rag_vector_outbox_delete"),
    ("document_embeddings", "rag_vector_outbox_update"),
    ("documents_document", "rag_vector_outbox_move"),
)


class MilvusUnavailable(Exception):
    """Milvus did not answer, or refused the request."""


def milvus_enabled() -> bool:
    return settings.RAG_VECTOR_BACKEND == "milvus"


def collection_name(model_id: str, dimension: int) -> str:
    """The Milvus collection of one model's vectors (a name Milvus accepts, whatever the model id holds)."""
    return f"{settings.RAG_MILVUS_COLLECTION_PREFIX}_{hashlib.sha1(model_id.encode()).hexdigest()[:10]}_{int(dimension)}"


_clients: dict[tuple, MilvusClient] = {}
_clients_lock = threading.Lock()
_created: set[tuple[str, str]] = set()


def client() -> MilvusClient:
    """One client per process and address (gRPC channels do not survive a fork: a forked worker makes its own)."""
    from pymilvus import MilvusClient

    uri = settings.RAG_MILVUS_URI
    if not uri:
        raise ImproperlyConfigured(
            "RAG_VECTOR_BACKEND=milvus needs RAG_MILVUS_URI: a Milvus server, or a Milvus Lite directory "
            "(`make run` starts Milvus Lite itself when it is unset)"
        )
    key = (os.getpid(), uri, settings.RAG_MILVUS_TOKEN, settings.RAG_MILVUS_DATABASE)
    with _clients_lock:
        found = _clients.get(key)
        if found is None:
            options: dict[str, Any] = {"uri": uri, "timeout": settings.RAG_MILVUS_TIMEOUT}
            if settings.RAG_MILVUS_TOKEN:
                options["token"] = settings.RAG_MILVUS_TOKEN
            if settings.RAG_MILVUS_DATABASE:
                options["db_name"] = settings.RAG_MILVUS_DATABASE
            found = _clients[key] = MilvusClient(**options)
        return found


def ensure_collection(model_id: str, dimension: int) -> str:
    """Create (and load) the model's collection and its HNSW cosine index if missing; its name."""
    from pymilvus import DataType, MilvusClient

    name = collection_name(model_id, dimension)
    key = (settings.RAG_MILVUS_URI, name)
    if key in _created:
        return name
    milvus = client()
    if not milvus.has_collection(name):
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", DataType.INT64, is_primary=True)
        schema.add_field("team", DataType.VARCHAR, max_length=36, is_partition_key=True)
        schema.add_field("collection", DataType.VARCHAR, max_length=36)
        schema.add_field("document", DataType.VARCHAR, max_length=36)
        schema.add_field("version", DataType.INT64)
        schema.add_field("model", DataType.VARCHAR, max_length=200)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=int(dimension))
        index = milvus.prepare_index_params()
        index.add_index(
            field_name="embedding",
            index_type="HNSW",
            metric_type="COSINE",
            params={"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION},
        )
        milvus.create_collection(name, schema=schema, index_params=index)
    milvus.load_collection(name)
    _created.add(key)
    return name


def our_collections() -> list[str]:
    prefix = f"{settings.RAG_MILVUS_COLLECTION_PREFIX}_"
    return [name for name in client().list_collections() if name.startswith(prefix)]


def drop_collection(name: str) -> None:
    client().drop_collection(name)
    _created.discard((settings.RAG_MILVUS_URI, name))


@dataclass(frozen=True)
class VectorRow:
    """One chunk as Milvus stores it."""

    chunk_id: int
    team: str
    collection: str
    document: str
    version: int
    model: str
    embedding: Sequence[float]

    def as_entity(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "team": self.team,
            "collection": self.collection,
            "document": self.document,
            "version": self.version,
            "model": self.model,
            "embedding": [float(x) for x in self.embedding],
        }


def upsert(*, model_id: str, dimension: int, rows: Sequence[VectorRow], batch: int = 1000) -> None:
    name = ensure_collection(model_id, dimension)
    for start in range(0, len(rows), batch):
        client().upsert(name, [row.as_entity() for row in rows[start : start + batch]])


def delete(*, chunk_ids: Iterable[int], names: Sequence[str] | None = None) -> None:
    """Drop these chunks' vectors from every collection of ours (a deleted chunk's model is no longer known)."""
    ids = [int(pk) for pk in chunk_ids]
    if not ids:
        return
    for name in our_collections() if names is None else names:
        client().delete(name, ids=ids)


@dataclass(frozen=True)
class StoredRow:
    chunk_id: int
    team: str
    collection: str
    document: str
    version: int


def stored_rows(name: str, *, batch: int = 5000) -> Iterator[StoredRow]:
    """Every row of a collection, without its vector (reconciliation compares these with PostgreSQL)."""
    iterator = client().query_iterator(
        name, batch_size=batch, filter="", output_fields=["chunk_id", "team", "collection", "document", "version"]
    )
    try:
        while page := iterator.next():
            for row in page:
                yield StoredRow(int(row["chunk_id"]), row["team"], row["collection"], row["document"], int(row["version"]))
    finally:
        iterator.close()


@dataclass(frozen=True)
class Found:
    chunk_id: int
    score: float


def search(*, model_id: str, dimension: int, vector: Sequence[float], expression: str, limit: int, ef: int) -> list[Found]:
    """The `limit` nearest rows matching `expression` (cosine, best first); fewer when fewer match."""
    from pymilvus.exceptions import MilvusException

    try:
        name = ensure_collection(model_id, dimension)
        results = client().search(
            name,
            data=[[float(x) for x in vector]],
            filter=expression,
            limit=min(limit, MAX_TOP_K),
            output_fields=["chunk_id"],  # no vector back
            search_params={"metric_type": "COSINE", "params": {"ef": max(ef, limit)}},
            timeout=settings.RAG_MILVUS_TIMEOUT,
        )
    except (MilvusException, OSError) as exc:
        raise MilvusUnavailable(str(exc)) from exc
    return [Found(int(hit["chunk_id"]), float(hit["distance"])) for hit in results[0]]


def quoted(values: Iterable[uuid.UUID | str]) -> str:
    """A Milvus list literal of ids (UUIDs only reach here: nothing in them needs escaping)."""
    return "[" + ",".join(f'"{uuid.UUID(str(value))}"' for value in values) + "]"


def set_outbox_triggers(*, enabled: bool) -> None:
    """Switch the outbox triggers (migration 0024) on for the milvus backend, off for pgvector (and empty the outbox).

    Run after every `migrate` (rag.receivers) and by the drain; reconciliation finds what was written while
    they were off.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'rag_vector_outbox_%%' AND tgenabled <> 'D'",
        )
        on = cursor.fetchone()[0] == len(_OUTBOX_TRIGGERS)
        if on == enabled:
            return
        for table, trigger in _OUTBOX_TRIGGERS:
            cursor.execute(f"ALTER TABLE {table} {'ENABLE' if enabled else 'DISABLE'} TRIGGER {trigger}")
        if not enabled:
            cursor.execute("DELETE FROM rag_vector_outbox")
