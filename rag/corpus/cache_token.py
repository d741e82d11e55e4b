"""Each team's cache token: it changes whenever what the team's members can retrieve may have changed.

Anything cached from a team's documents (the answer cache) is stored with the token it was
computed under and is served only while that is still the team's token. Changes to documents,
collections, memberships and groups (rag.receivers) and every swap of a document's chunks (the
indexing pipeline) call `team_changed`.

The token is random rather than a counter: a token evicted from the cache, or lost with a Redis
restart, is replaced by a new one, so nothing cached under the old one can be served again (a
counter starting over could meet its old values).
"""

from __future__ import annotations

import uuid

from django.core.cache import cache
from django.db import transaction


def cache_token_key(team_id: uuid.UUID | str) -> str:
    """The cache key of the team's token (readers fetch it in one round trip with their own keys)."""
    # The key's text predates the module's name: kept, so a running deployment's tokens stay valid.
    return f"rag:team-generation:{team_id}"


def ensure_cache_token(team_id: uuid.UUID | str) -> str | None:
    """The team's token, starting one if it has none; None while the cache cannot be reached."""
    started = uuid.uuid4().hex
    if cache.add(cache_token_key(team_id), started, None):
        return started
    return cache.get(cache_token_key(team_id))  # another request started one first (or the cache is down: None)


def _new_cache_token(team_id: uuid.UUID | str) -> None:
    cache.set(cache_token_key(team_id), uuid.uuid4().hex, None)


def team_changed(team_id: uuid.UUID | str | None) -> None:
    """Give the team a new token, now and again once the current transaction commits.

    Now: this transaction's own later reads, and tests (whose transactions never commit), see it.
    After the commit: a request that read the new token before the commit computed its answer
    from the data before the change, and must not keep it.
    """
    if team_id is None:
        return
    _new_cache_token(team_id)
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: _new_cache_token(team_id))
