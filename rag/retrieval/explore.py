"""Exploring the knowledge graph: find entities by name, one entity's neighbours and passages, and the
passage a relation was read from.

Every count, neighbour, relation and passage is read through the viewer's visible documents (the
same compiled scope as search) and rag.retrieval.graph_policy: an entity with no visible mention does
not exist for the viewer, and words are a document's title only to those who can read that document.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import connection

from config.errors import NotFound
from permissions.models import User
from rag.corpus.names import entity_key
from rag.corpus.serving_model import serving_model
from rag.retrieval.graph_policy import mention_counts, relation_counts
from rag.retrieval.hits import chunk_ref
from rag.retrieval.visibility import SearchScope, search_scope


@dataclass(frozen=True)
class EntitySummary:
    id: uuid.UUID
    name: str
    kind: str
    mentions: int  # visible chunks that name it
    documents: int  # visible documents those chunks belong to


@dataclass(frozen=True)
class Neighbour:
    entity: EntitySummary
    predicate: str
    direction: str  # "out": this entity -> neighbour; "in": neighbour -> this entity
    confidence: float
    weight: float
    chunk: str  # the chunk a supporting fact was read from (a visible one), as `chunk_ref`


@dataclass(frozen=True)
class Passage:
    chunk: str  # as `chunk_ref`
    document_id: uuid.UUID
    title: str
    chunk_index: int
    text: str


@dataclass(frozen=True)
class PassageAt(Passage):
    """A passage with where it sits in its document's text, so a link can highlight it."""

    version: int
    start: int
    end: int


@dataclass(frozen=True)
class EntityDetail:
    entity: EntitySummary
    neighbours: list[Neighbour]
    passages: list[Passage]


def _summaries(scope: SearchScope, where: str, params: list, *, limit: int, offset: int = 0) -> tuple[list[EntitySummary], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH v AS MATERIALIZED ({scope.whole_sql}),
                counted AS (
                    -- A document's title is a `document` only to viewers who can read a document so titled.
                    SELECT e.id, e.name,
                           CASE WHEN bool_or(m.subject) THEN 'document' WHEN e.kind = 'document' THEN 'name' ELSE e.kind END,
                           count(*) AS mentions, count(DISTINCT m.document_id) AS documents
                    FROM graph_entities e
                    JOIN graph_mentions m ON m.entity_id = e.id AND m.model_id = %s
                    JOIN v ON v.id = m.document_id AND v.version = m.document_version
                    WHERE e.team_id = %s AND {where} AND {mention_counts("m", "v")}
                    GROUP BY e.id, e.name, e.kind)
                SELECT id, name, kind, mentions, documents, count(*) OVER () FROM counted
                ORDER BY mentions DESC, name, id LIMIT %s OFFSET %s""",
            [*scope.whole_params, serving_model(scope.user.team_id).model_id, scope.user.team_id, *params, limit, offset],
        )
        rows = cursor.fetchall()
    return [EntitySummary(*row[:5]) for row in rows], (rows[0][5] if rows else 0)


def entity_list(*, user: User, query: str, limit: int = 25, offset: int = 0) -> tuple[list[EntitySummary], int]:
    """Entities whose name contains `query` (all when empty), most mentioned first, and how many match."""
    scope = search_scope(user=user)
    key = entity_key(query)
    if not key:
        return _summaries(scope, "TRUE", [], limit=limit, offset=offset)
    like = "%" + key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return _summaries(scope, "e.key LIKE %s", [like], limit=limit, offset=offset)


def entity_get(*, user: User, entity_id: uuid.UUID, limit: int = 25) -> EntityDetail:
    """One entity as the viewer may see it: 404 unless one of its mentions is visible."""
    scope = search_scope(user=user)
    found, _ = _summaries(scope, "e.id = %s", [entity_id], limit=1)
    if not found:
        raise NotFound("Entity not found.")
    model_id = serving_model(user.team_id).model_id
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH v AS MATERIALIZED ({scope.whole_sql}),
                edges AS (
                    SELECT r.target_id AS other, 'out' AS direction, r.predicate, r.confidence, r.weight, r.chunk_id
                    FROM graph_relations r JOIN v ON v.id = r.document_id AND v.version = r.document_version
                    WHERE r.source_id = %s AND r.model_id = %s AND {relation_counts("r", "v")}
                    UNION ALL
                    SELECT r.source_id, 'in', r.predicate, r.confidence, r.weight, r.chunk_id
                    FROM graph_relations r JOIN v ON v.id = r.document_id AND v.version = r.document_version
                    WHERE r.target_id = %s AND r.model_id = %s AND {relation_counts("r", "v")}),
                best AS (
                    SELECT DISTINCT ON (other, direction, predicate) other, direction, predicate, confidence, weight, chunk_id
                    FROM edges WHERE other <> %s ORDER BY other, direction, predicate, weight DESC, chunk_id)
                SELECT b.other, b.direction, b.predicate, b.confidence, b.weight, c.document_id, c.document_version, c.chunk_index
                FROM best b JOIN document_embeddings c ON c.id = b.chunk_id""",
            [*scope.whole_params, entity_id, model_id, entity_id, model_id, entity_id],
        )
        edges = cursor.fetchall()
    others, _ = _summaries(scope, "e.id = ANY(%s)", [[row[0] for row in edges]], limit=10_000) if edges else ([], 0)
    by_id = {summary.id: summary for summary in others}
    neighbours = sorted(
        (
            Neighbour(by_id[o], p, d, float(c), float(w), chunk_ref(doc, version, index))
            for o, d, p, c, w, doc, version, index in edges
            if o in by_id
        ),
        # A total order: a page cut among ties must not depend on the order the rows came in.
        key=lambda n: (-n.weight, n.predicate, n.entity.name, n.direction, n.chunk),
    )[:limit]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH v AS MATERIALIZED ({scope.whole_sql})
                SELECT e.document_id, e.document_version, e.chunk_index, d.title, e.chunk_text
                FROM graph_mentions m
                JOIN v ON v.id = m.document_id AND v.version = m.document_version
                JOIN document_embeddings e ON e.id = m.chunk_id
                JOIN documents_document d ON d.id = e.document_id
                WHERE m.entity_id = %s AND m.model_id = %s AND {mention_counts("m", "v")}
                ORDER BY m.subject DESC, m.count DESC, e.id LIMIT %s""",
            [*scope.whole_params, entity_id, model_id, limit],
        )
        passages = [
            Passage(chunk=chunk_ref(doc, version, index), document_id=doc, title=title, chunk_index=index, text=text)
            for doc, version, index, title, text in cursor.fetchall()
        ]
    return EntityDetail(entity=found[0], neighbours=neighbours, passages=passages)


def passage_get(*, user: User, document_id: uuid.UUID, version: int, chunk_index: int) -> PassageAt:
    """A relation's passage by its `chunk_ref` parts: 404 unless it is in the current version of a document the viewer may read."""
    scope = search_scope(user=user, document_id=document_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH v AS MATERIALIZED ({scope.whole_sql})
                SELECT d.title, e.chunk_text, e.start_offset, e.end_offset
                FROM document_embeddings e
                JOIN v ON v.id = e.document_id AND v.version = e.document_version
                JOIN documents_document d ON d.id = e.document_id
                WHERE e.document_id = %s AND e.document_version = %s AND e.chunk_index = %s AND e.model_id = %s""",
            [*scope.whole_params, document_id, version, chunk_index, serving_model(user.team_id).model_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Passage not found.")
    title, text, start, end = row
    return PassageAt(
        chunk=chunk_ref(document_id, version, chunk_index),
        document_id=document_id,
        title=title,
        chunk_index=chunk_index,
        text=text,
        version=version,
        start=start,
        end=end,
    )
