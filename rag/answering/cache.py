"""The answer cache: a repeated question answered without retrieval or the LLM, never past the asker's access.

An entry is keyed by everything that decides the answer: the asker (answers are made from what they
may read), the question with its spacing normalised, its scope and passage limit, the conversation
context, and the settings of retrieval, evidence and generation (`answer_settings`). It is stored
with the asker's team cache token (rag.corpus.cache_token) read before the answer was started, and
served only while both hold:

- the team still has that token: any change to the team's documents, collections,
  memberships or groups, and every swap of a document's chunks, starts a new one;
- one query through the access policy (`Document.objects.visible_to`, compiled by `search_scope`)
  finds every document the answer was made from (every passage, cited or not: an LLM reads them
  all) still visible to the asker, at the version and title it had. This holds even if a change's signal was missed or the cache lost a new
  token: a revoked membership is honoured on the very next request.

Only answers that completed as designed are stored (`answer_events` decides): never an error, never
an answer that fell back after an LLM failure, never a stream its reader left. Insufficient answers
are stored: they are the answer to that question over those documents, and a document that could
answer it gives the team a new token. A request for a fresh answer (rag.answer's `fresh`, the page's
*Regenerate*) reads no entry, and its answer, stored as any other, replaces the one there was.

Case is kept: the LLM, and embedding models other than the local (uncased) one, read the question
as typed, so "Vera Lind" and "vera lind" may be answered differently.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.core.cache import cache

from config.replicas import read_connection
from documents.models import Document
from documents.selectors import collection_get, document_get
from permissions.models import User
from rag.answering.confidence import ConfidenceFactors
from rag.answering.prompt import SYSTEM_PROMPT
from rag.corpus.cache_token import cache_token_key, ensure_cache_token
from rag.retrieval.visibility import search_scope

# Bump when a change to the answering code gives other answers to the same question, documents and settings.
ANSWER_CACHE_VERSION = 3


def answer_settings() -> list:
    """The settings an answer depends on besides the question and the documents (the prompt's text included)."""
    return [
        ANSWER_CACHE_VERSION,
        hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest(),
        settings.RAG_EMBEDDING_PROVIDER,
        settings.RAG_EMBEDDING_MODEL,
        settings.RAG_EMBEDDING_DIMENSION,
        settings.RAG_SIMILARITY_THRESHOLD,
        settings.RAG_ANSWER_MIN_SCORE,
        settings.RAG_ANSWER_NEIGHBOURS,
        settings.RAG_ANSWER_CONTEXT_TOKENS,
        settings.RAG_ANSWER_STALE_DAYS,
        list(settings.RAG_HYBRID_WEIGHTS),
        settings.RAG_MAX_CHUNKS_PER_DOCUMENT,
        settings.RAG_EXACT_SEARCH_MAX_CHUNKS,
        settings.RAG_GRAPH_ENABLED,
        settings.RAG_RERANK_MODEL,
        settings.RAG_LLM_PROVIDER,
        settings.RAG_LLM_MODEL,
        settings.RAG_LLM_BASE_URL,
        settings.RAG_LLM_MAX_TOKENS,
        settings.RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE,
    ]


@dataclass(frozen=True)
class CacheSlot:
    """Where the answer to one request is kept, and the team cache token it is being computed under."""

    key: str
    token: str


@dataclass
class CachedAnswer:
    answer: str
    citations: list[dict]
    confidence: str
    # As judged when the answer was made (a version's age in days is that of then).
    confidence_factors: ConfidenceFactors
    mode: str
    passages: int
    html: str
    # (document id, version, title) of every passage the answer was made from.
    sources: list[tuple[str, int, str]] = field(default_factory=list)
    # How many of those passages each ranking found (vector, keyword, graph).
    rankings: dict[str, int] = field(default_factory=dict)


def _key(
    *, user: User, query: str, limit: int, collection_id, document_id, tags: Sequence[str], context: str, include_graph: bool
) -> str:
    parts = [
        include_graph,
        str(user.pk),
        str(user.team_id),
        " ".join(query.split()),
        limit,
        str(collection_id or ""),
        str(document_id or ""),
        sorted(tags),
        context,
        answer_settings(),
    ]
    return "rag:answer:" + hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def _still_readable(user: User, sources: list[tuple[str, int, str]]) -> bool:
    """Every source document is still visible to the asker, at the version and title the answer quoted.

    One query, through the access policy as search compiles it (`search_scope`, compiled once per asker).
    """
    wanted = {str(document_id): (version, title) for document_id, version, title in sources}
    if not wanted:
        return True
    scope = search_scope(user=user)
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"""SELECT visible.id, visible.version, d.title
                FROM ({scope.sql}) visible JOIN {Document._meta.db_table} d ON d.id = visible.id
                WHERE visible.id = ANY(%s)""",
            [*scope.params, [uuid.UUID(d) for d in wanted]],
        )
        current = {str(pk): (version, title) for pk, version, title in cursor.fetchall()}
    return current == wanted


def answer_cache_lookup(
    *,
    user: User,
    query: str,
    limit: int,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    tags: Sequence[str] = (),
    context: str = "",
    fresh: bool = False,
    include_graph: bool = True,
) -> tuple[CacheSlot | None, CachedAnswer | None]:
    """The slot this request's answer goes to (None: not cached) and the answer found there, if it may be served.

    `fresh` (an answer asked for again) only takes the slot: the answer made is stored over what it held.
    A scope the asker can no longer see is `not_found`, as search would say.
    """
    if not settings.RAG_ANSWER_CACHE or user.team_id is None:
        return None, None
    key = _key(
        user=user,
        query=query,
        limit=limit,
        collection_id=collection_id,
        document_id=document_id,
        tags=tags,
        context=context,
        include_graph=include_graph,
    )
    # One round trip on a hit; a fresh answer reads only the token.
    found = cache.get_many([cache_token_key(user.team_id)] if fresh else [key, cache_token_key(user.team_id)])
    token = found.get(cache_token_key(user.team_id)) or ensure_cache_token(user.team_id)
    if token is None:  # the cache cannot be reached: answer without it
        return None, None
    slot = CacheSlot(key=key, token=token)
    entry = found.get(key)
    if not isinstance(entry, dict) or entry.get("token") != token:
        return slot, None
    try:
        hit = CachedAnswer(**{name: value for name, value in entry.items() if name != "token"})
    except TypeError:  # stored by another version of this code
        return slot, None
    if collection_id is not None:
        collection_get(user=user, collection_id=collection_id)
    if document_id is not None:
        document_get(user=user, document_id=document_id, include_archived=False)
    if not _still_readable(user, hit.sources):
        return slot, None
    return slot, hit


def answer_cache_store(slot: CacheSlot, answer: CachedAnswer) -> None:
    cache.set(slot.key, {"token": slot.token, **asdict(answer)}, settings.RAG_ANSWER_CACHE_TTL)
