"""Exploring the knowledge graph: find entities by name, one entity's neighbours and passages, and the
passage a relation was read from.

Every count, neighbour, relation and passage is read through the viewer's visible documents (the
same compiled scope as search) and rag.retrieval.graph_policy: an entity with no visible mention does
not exist for the viewer, and words are a document's title only to those who can read that document.
An entity's name and kind are those its visible mentions give, never those of the chunk that first named it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from config.errors import NotFound
from config.replicas import read_connection
from permissions.models import User
from rag.corpus.names import entity_key
from rag.corpus.serving_model import serving_model
from rag.models import GENERIC_KINDS
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


# An entity's name as the viewer's passages write it: the title of a document they can read that bears it, else the
# spelling most of their passages naming it use; ties to the first in byte order. Only the spellings of subject and
# named mentions count: a title-only mention's words are some document's title, perhaps spelt as a private one is.
_SPELLING = """
    SELECT m.name FROM graph_mentions m JOIN v ON v.id = m.document_id AND v.version = m.document_version
    WHERE m.entity_id = p.id AND m.model_id = %(model)s AND (m.subject OR NOT m.title_only)
    GROUP BY m.name ORDER BY bool_or(m.subject) DESC, count(*) DESC, m.name COLLATE "C" LIMIT 1"""
# Its kind, when it is not the title of a document they can read (`document` then): the one most of their passages
# naming it give, a type the llm extractor gives before a generic kind (rag.models.GENERIC_KINDS).
_KIND = """
    SELECT m.kind FROM graph_mentions m JOIN v ON v.id = m.document_id AND v.version = m.document_version
    WHERE NOT p.titled AND m.entity_id = p.id AND m.model_id = %(model)s AND NOT m.subject AND NOT m.title_only
    GROUP BY m.kind ORDER BY m.kind = ANY(%(generic)s), count(*) DESC, m.kind COLLATE "C" LIMIT 1"""


def _summaries(scope: SearchScope, where: str, params: dict, *, limit: int, offset: int = 0) -> tuple[list[EntitySummary], int]:
    """The visible entities matching `where` (SQL over `e`, graph_entities), most mentioned first, and how many match.

    Each is shown as the viewer's passages show it: counted from the mentions they can read, spelt and typed
    as those mentions are (`_SPELLING`, `_KIND`), never as the chunk that first named it, which may be
    private. Spelling and kind are read for the page's entities only.
    """
    visible, visible_params = scope.whole_named
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"""WITH v AS MATERIALIZED ({visible}),
                counted AS (
                    SELECT e.id, e.key, bool_or(m.subject) AS titled,
                           count(*) AS mentions, count(DISTINCT m.document_id) AS documents
                    FROM graph_entities e
                    JOIN graph_mentions m ON m.entity_id = e.id AND m.model_id = %(model)s
                    JOIN v ON v.id = m.document_id AND v.version = m.document_version
                    WHERE e.team_id = %(team)s AND {where} AND {mention_counts("m", "v")}
                    GROUP BY e.id, e.key),
                page AS (
                    SELECT counted.*, count(*) OVER () AS total FROM counted
                    ORDER BY mentions DESC, key, id LIMIT %(limit)s OFFSET %(offset)s)
                SELECT p.id, coalesce(spelt.name, p.key), CASE WHEN p.titled THEN 'document' ELSE coalesce(typed.kind, 'name') END,
                       p.mentions, p.documents, p.total
                FROM page p
                LEFT JOIN LATERAL ({_SPELLING}) spelt ON TRUE
                LEFT JOIN LATERAL ({_KIND}) typed ON TRUE
                ORDER BY p.mentions DESC, p.key, p.id""",
            {
                **visible_params,
                **params,
                "model": serving_model(scope.user.team_id).model_id,
                "team": scope.user.team_id,
                "limit": limit,
                "offset": offset,
                "generic": [str(kind) for kind in GENERIC_KINDS],
            },
        )
        rows = cursor.fetchall()
    return [EntitySummary(*row[:5]) for row in rows], (rows[0][5] if rows else 0)


def entity_list(*, user: User, query: str, limit: int = 25, offset: int = 0) -> tuple[list[EntitySummary], int]:
    """Entities whose name contains `query` (all when empty), most mentioned first, and how many match."""
    if user.team_id is None:  # an operator without a team sees nothing, and their empty policy compiles to no SQL
        return [], 0
    scope = search_scope(user=user)
    key = entity_key(query)
    if not key:
        return _summaries(scope, "TRUE", {}, limit=limit, offset=offset)
    like = "%" + key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return _summaries(scope, "e.key LIKE %(like)s", {"like": like}, limit=limit, offset=offset)


def entity_get(*, user: User, entity_id: uuid.UUID, limit: int = 25) -> EntityDetail:
    """One entity as the viewer may see it: 404 unless one of its mentions is visible."""
    if user.team_id is None:
        raise NotFound("Entity not found.")
    scope = search_scope(user=user)
    found, _ = _summaries(scope, "e.id = %(id)s", {"id": entity_id}, limit=1)
    if not found:
        raise NotFound("Entity not found.")
    model_id = serving_model(user.team_id).model_id
    with read_connection().cursor() as cursor:
        # The neighbours that count for the viewer (one of their mentions does: `visible_mention`), with their keys
        # to order by; only the page's are summarised (counted, spelt) after.
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
                SELECT b.other, o.key, b.direction, b.predicate, b.confidence, b.weight,
                       c.document_id, c.document_version, c.chunk_index
                FROM best b JOIN document_embeddings c ON c.id = b.chunk_id JOIN graph_entities o ON o.id = b.other
                WHERE EXISTS (
                    SELECT 1 FROM graph_mentions m JOIN v ON v.id = m.document_id AND v.version = m.document_version
                    WHERE m.entity_id = b.other AND m.model_id = %s AND {mention_counts("m", "v")})""",
            [*scope.whole_params, entity_id, model_id, entity_id, model_id, entity_id, model_id],
        )
        # A total order: a page cut among ties must not depend on the order the rows came in.
        edges = sorted(
            (
                (o, key, d, p, c, w, chunk_ref(doc, version, index))
                for o, key, d, p, c, w, doc, version, index in cursor.fetchall()
            ),
            key=lambda edge: (-edge[5], edge[3], edge[1], edge[2], edge[6]),
        )[:limit]
    others, _ = (
        _summaries(scope, "e.id = ANY(%(ids)s)", {"ids": list({row[0] for row in edges})}, limit=limit) if edges else ([], 0)
    )
    by_id = {summary.id: summary for summary in others}
    neighbours = [Neighbour(by_id[o], p, d, float(c), float(w), chunk) for o, _, d, p, c, w, chunk in edges if o in by_id]
    with read_connection().cursor() as cursor:
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
    if user.team_id is None:
        raise NotFound("Passage not found.")
    scope = search_scope(user=user, document_id=document_id)
    with read_connection().cursor() as cursor:
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
