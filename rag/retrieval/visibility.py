"""The one place search compiles the access policy to SQL: once per request, shared by every ranking.

`Document.objects.visible_to(user)` is the policy; `search_scope` turns it (narrowed to a
collection, a document or documents carrying given tags when asked) into a subquery of (id, version, collection_id) rows
that each ranking query joins its chunks with, inside its WHERE clause, before anything is ranked or counted.
Beside it, the collections those documents can be in, for the indexes that lead with a collection: they narrow
what a query reads, and the join with the visible documents still decides.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from config.replicas import read_connection
from documents.models import Collection, Document, DocumentMembership
from permissions.models import User
from rag.corpus.milvus import quoted


def _named(sql: str, params: tuple, prefix: str = "v") -> tuple[str, dict]:
    """`sql` with named parameters (`%(v0)s`, ...; another `prefix` for another piece of the same query)."""
    # Protect literal %% while numbering the positional placeholders in order.
    sql = sql.replace("%%", "\x00")
    for i in range(len(params)):
        sql = sql.replace("%s", f"%({prefix}{i})s", 1)
    return sql.replace("\x00", "%%"), {f"{prefix}{i}": value for i, value in enumerate(params)}


@dataclass(frozen=True)
class SearchScope:
    """What one search may read: the viewer's visible documents, optionally narrowed, as SQL.

    The same set in two shapes, for the two ways a query reads it. `sql` is the policy as one filter on
    the documents (an OR of the two ways in): for a query that checks candidate rows against it one by
    one (an HNSW walk, a graph hop), each check a primary-key lookup with the readable collections
    computed once. `whole_sql` is the UNION ALL of the two disjoint ways (visible_to_each_way): for a
    query that reads the whole set first (materialised), each way read through its own index. Used the
    other way round, each shape costs several times more (bench/latency.py at 100k chunks).
    """

    user: User
    collection_id: uuid.UUID | None
    document_id: uuid.UUID | None
    sql: str
    params: tuple
    whole_sql: str
    whole_params: tuple
    # SQL selecting the collections the scope's documents can be in: those the viewer reads, and those of the
    # documents shared with them (a few ids, whatever the number of documents).
    collections_sql: str
    collections_params: tuple
    tags: tuple[str, ...] = ()

    @cached_property
    def named(self) -> tuple[str, dict]:
        """`sql` with named parameters."""
        return _named(self.sql, self.params)

    @cached_property
    def whole_named(self) -> tuple[str, dict]:
        """`whole_sql` with named parameters."""
        return _named(self.whole_sql, self.whole_params)

    @cached_property
    def collections_named(self) -> tuple[str, dict]:
        """`collections_sql` with named parameters, apart from `named`'s (to be used in the same query)."""
        return _named(self.collections_sql, self.collections_params, prefix="c")

    @property
    def cache_key(self) -> str:
        # Tags are free text: joined with a character no tag may hold (documents.tags refuses commas).
        return f"{self.user.pk}:{self.collection_id}:{self.document_id}:{','.join(self.tags)}"


# Compiled policies by (user, team, collection, document, tags). The SQL holds only these ids and tags as
# parameters: memberships, access and documents are read when it runs, so it never goes stale, and
# compiling it (the ORM building its subqueries) costs several times what running it does. Cleared when full.
_COMPILED: dict[tuple, tuple[str, tuple, str, tuple, str, tuple]] = {}
_COMPILED_MAX = 10_000
_COLUMNS = ("id", "version", "collection_id")


def _narrowed(qs, *, collection_id: uuid.UUID | None, document_id: uuid.UUID | None, tags: tuple[str, ...]):
    if collection_id is not None:
        qs = qs.filter(collection_id=collection_id)
    if document_id is not None:
        qs = qs.filter(pk=document_id)
    if tags:
        qs = qs.filter(tags__contains=list(tags))
    return qs.order_by().values(*_COLUMNS)


def _collections(user: User, *, collection_id: uuid.UUID | None, document_id: uuid.UUID | None):
    """The collections `Document.objects.visible_to(user)` (so narrowed) can hold documents in: a superset, as a query."""
    if document_id is not None:
        return Document.objects.filter(pk=document_id).values("collection_id")
    readable = Collection.objects.visible_to(user).order_by().values("id")
    shared = DocumentMembership.objects.filter(user_id=user.pk).order_by().values("document__collection_id")
    if collection_id is not None:
        readable, shared = readable.filter(pk=collection_id), shared.filter(document__collection_id=collection_id)
    return readable.union(shared)


def search_scope(
    *,
    user: User,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    tags: Sequence[str] = (),
) -> SearchScope:
    """Compile the policy for `user` (narrowed to a collection, a document, documents carrying every one of
    `tags`) to SQL selecting (id, version, collection_id), in both shapes."""
    wanted = tuple(sorted(tags))
    key = (user.pk, user.team_id, user.is_authenticated, collection_id, document_id, wanted)
    compiled = _COMPILED.get(key)
    if compiled is None:
        narrow = functools.partial(_narrowed, collection_id=collection_id, document_id=document_id, tags=wanted)
        sql, params = narrow(Document.objects.visible_to(user)).query.sql_with_params()
        through_collection, only_shared = (narrow(qs) for qs in Document.objects.visible_to_each_way(user))
        whole_sql, whole_params = through_collection.union(only_shared, all=True).query.sql_with_params()
        collections_sql, collections_params = _collections(
            user, collection_id=collection_id, document_id=document_id
        ).query.sql_with_params()
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        compiled = _COMPILED[key] = (
            sql,
            tuple(params),
            whole_sql,
            tuple(whole_params),
            collections_sql,
            tuple(collections_params),
        )
    sql, params, whole_sql, whole_params, collections_sql, collections_params = compiled
    return SearchScope(
        user=user,
        collection_id=collection_id,
        document_id=document_id,
        sql=sql,
        params=params,
        whole_sql=whole_sql,
        whole_params=whole_params,
        collections_sql=collections_sql,
        collections_params=collections_params,
        tags=wanted,
    )


# A scope of up to this many visible documents goes to Milvus as their list: exact, nothing for the check to drop.
MILVUS_DOCUMENT_LIST_MAX = 1_000
# A wider one goes as the readable collections (and the documents shared with the viewer outside them), less at
# most this many documents of those collections the viewer may not see (drafts, archived, deleted); beyond that
# the check against the visible documents drops them and Milvus is asked for more.
MILVUS_EXCLUDE_MAX = 1_000


def milvus_expression(scope: SearchScope) -> str | None:
    """The scope as a Milvus filter expression over the chunks' scalar fields (None: nothing is visible).

    Built from PostgreSQL at each search (ids only), so it never goes stale; it may be wider than the scope, never
    narrower: the vector ranking checks every hit against the visible documents again (rag.retrieval.vector).
    """
    team = f'team == "{scope.user.team_id}"'
    if scope.document_id is not None:
        return f'{team} and document == "{scope.document_id}"'
    visible, params = scope.whole_named
    with read_connection().cursor() as cursor:
        cursor.execute(f"SELECT id FROM ({visible}) v LIMIT %(most)s", {**params, "most": MILVUS_DOCUMENT_LIST_MAX + 1})
        documents = [pk for (pk,) in cursor.fetchall()]
        if not documents:
            return None
        if len(documents) <= MILVUS_DOCUMENT_LIST_MAX:
            return f"{team} and document in {quoted(documents)}"
        readable = Collection.objects.visible_to(scope.user).order_by()
        if scope.collection_id is not None:
            readable = readable.filter(pk=scope.collection_id)
        collections = list(readable.values_list("id", flat=True))
        cursor.execute(
            f"SELECT id FROM ({visible}) v WHERE NOT collection_id = ANY(%(readable)s)", {**params, "readable": collections}
        )
        shared = [pk for (pk,) in cursor.fetchall()]
        cursor.execute(
            f"SELECT d.id FROM documents_document d WHERE d.collection_id = ANY(%(readable)s)"
            f" AND NOT EXISTS (SELECT FROM ({visible}) v WHERE v.id = d.id) LIMIT %(most)s",
            {**params, "readable": collections, "most": MILVUS_EXCLUDE_MAX + 1},
        )
        hidden = [pk for (pk,) in cursor.fetchall()]
    ways = [f"collection in {quoted(collections)}"] if collections else []
    if shared:
        ways.append(f"document in {quoted(shared)}")
    expression = f"{team} and ({' or '.join(ways)})"
    if hidden and len(hidden) <= MILVUS_EXCLUDE_MAX:
        expression += f" and not (document in {quoted(hidden)})"
    return expression
