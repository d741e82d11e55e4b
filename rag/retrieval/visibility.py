"""The one place search compiles the access policy to SQL: once per request, shared by every ranking.

`Document.objects.visible_to(user)` is the policy; `search_scope` turns it (narrowed to a
collection, a document or documents carrying given tags when asked) into a subquery of (id, version, collection_id) rows
that each ranking query joins its chunks with, inside its WHERE clause, before anything is ranked or counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from documents.models import Document
from permissions.models import User


@dataclass(frozen=True)
class SearchScope:
    """What one search may read: the viewer's visible documents, optionally narrowed, as SQL."""

    user: User
    collection_id: uuid.UUID | None
    document_id: uuid.UUID | None
    sql: str
    params: tuple
    tags: tuple[str, ...] = ()

    @cached_property
    def named(self) -> tuple[str, dict]:
        """The same SQL with named parameters (`%(v0)s`, ...), for queries written with named ones."""
        # Protect literal %% while numbering the positional placeholders in order.
        sql = self.sql.replace("%%", "\x00")
        for i in range(len(self.params)):
            sql = sql.replace("%s", f"%(v{i})s", 1)
        return sql.replace("\x00", "%%"), {f"v{i}": value for i, value in enumerate(self.params)}

    @property
    def cache_key(self) -> str:
        # Tags are free text: joined with a character no tag may hold (documents.tags refuses commas).
        return f"{self.user.pk}:{self.collection_id}:{self.document_id}:{','.join(self.tags)}"


# Compiled policies by (user, team, collection, document, tags). The SQL holds only these ids and tags as
# parameters: memberships, access and documents are read when it runs, so it never goes stale, and
# compiling it (the ORM building its subqueries) costs several times what running it does. Cleared when full.
_COMPILED: dict[tuple, tuple[str, tuple]] = {}
_COMPILED_MAX = 10_000


def search_scope(
    *,
    user: User,
    collection_id: uuid.UUID | None = None,
    document_id: uuid.UUID | None = None,
    tags: Sequence[str] = (),
) -> SearchScope:
    """Compile the policy for `user` (narrowed to a collection, a document, documents carrying every one of
    `tags`) to SQL selecting (id, version, collection_id)."""
    wanted = tuple(sorted(tags))
    key = (user.pk, user.team_id, user.is_authenticated, collection_id, document_id, wanted)
    compiled = _COMPILED.get(key)
    if compiled is None:
        # The policy's two disjoint ways in, each narrowed, as one UNION ALL (see visible_to_each_way).
        ways = []
        for qs in Document.objects.visible_to_each_way(user):
            if collection_id is not None:
                qs = qs.filter(collection_id=collection_id)
            if document_id is not None:
                qs = qs.filter(pk=document_id)
            if wanted:
                qs = qs.filter(tags__contains=list(wanted))
            ways.append(qs.order_by().values("id", "version", "collection_id"))
        through_collection, only_shared = ways
        sql, params = through_collection.union(only_shared, all=True).query.sql_with_params()
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        compiled = _COMPILED[key] = (sql, tuple(params))
    sql, params = compiled
    return SearchScope(user=user, collection_id=collection_id, document_id=document_id, sql=sql, params=params, tags=wanted)
