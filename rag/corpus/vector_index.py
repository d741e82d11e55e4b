"""One partial HNSW index per embedding model, so models of different dimensions coexist."""

from __future__ import annotations

import hashlib

from django.db import connection

_ensured: set[tuple[str, str, int]] = set()


def vector_index_name(model_id: str, dimension: int) -> str:
    return f"document_embeddings_hnsw_{hashlib.sha1(model_id.encode()).hexdigest()[:10]}_{dimension}"


def vector_expression(dimension: int, alias: str = "") -> str:
    """The indexed expression; queries must use exactly this for the planner to pick the index."""
    column = f"{alias}.embedding" if alias else "embedding"
    return f"({column}::vector({int(dimension)}))"


def ensure_vector_index(model_id: str, dimension: int) -> None:
    """Create the model's HNSW cosine index if it is missing (cheap when it exists)."""
    key = (connection.settings_dict["NAME"], model_id, dimension)
    if key in _ensured:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {vector_index_name(model_id, dimension)} ON document_embeddings "
            f"USING hnsw ({vector_expression(dimension)} vector_cosine_ops) WHERE model_id = %s",
            [model_id],
        )
    _ensured.add(key)


def drop_vector_indexes(*, keep: set[str]) -> list[str]:
    """Drop the HNSW indexes of models other than `keep` (their chunks are gone); the names dropped."""
    kept = {vector_index_name(model_id, 0).rsplit("_", 1)[0] for model_id in keep}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'document_embeddings' AND indexname LIKE 'document_embeddings_hnsw_%%'"
        )
        names = [name for (name,) in cursor.fetchall() if name.rsplit("_", 1)[0] not in kept]
        for name in names:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    _ensured.difference_update({key for key in _ensured if vector_index_name(key[1], key[2]) in names})
    return names
