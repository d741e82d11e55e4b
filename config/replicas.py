"""Read replicas: a database router that sends a request's reads to a healthy replica and every write to the primary.

Only views that declare it (`replica_reads = True` on an API view, `@reads_from_replica` on a page: search,
answers, graph reads, document reads) read from a replica; everything else, workers and commands included,
reads the primary. Within such a request reads stay on the primary when:

- the client wrote within the last DATABASE_REPLICA_PIN_SECONDS (its credential is pinned in the shared cache
  when a request of its writes), so a writer reads its own writes whatever the replica's lag;
- the request has written itself, or the read runs inside `transaction.atomic()` on the primary;
- no replica is healthy: each is checked at most every DATABASE_REPLICA_CHECK_INTERVAL seconds per process, and
  one that does not answer, or whose replay lags more than DATABASE_REPLICA_MAX_LAG seconds, is skipped.

A view that fails on a replica's connection error is run again on the primary, so a replica that dies between two
checks costs its requests a retry, never an error; an MCP tool call is retried the same way (`retry_on_primary`).
Raw SQL that reads (rag.retrieval) takes its connection from `read_connection()`, which follows the same rules as
the router.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import RequestDataTooBig
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponseBase

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

# Writes a read request makes on the side, which nobody reads back at once: they do not pin their client.
UNPINNED_MODELS = frozenset({"permissions.apitoken", "rag.querylog", "rag.searchlog", "sessions.session"})

# Read from the primary even where a replica may serve: who is asking. A token or session made a moment ago
# works at once on any web server, whatever the replica's lag.
PRIMARY_MODELS = frozenset({"permissions.apitoken", "permissions.user", "sessions.session"})

# Seconds the replica's replay is behind: none while it streams and has replayed all it received (an idle
# primary sends nothing, and the last replayed commit's age would grow without any lag); otherwise the age
# of the last commit it replayed. A primary (not in recovery) lags nothing.
LAG_SQL = """
SELECT CASE
  WHEN NOT pg_is_in_recovery() THEN 0
  WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
   AND EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 0
  ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 1e9)
END
"""


@dataclass
class _Reads:
    """One request's routing: whether its reads may go to a replica, which one, and whether it wrote."""

    pin_key: str = ""
    allowed: bool = False
    wrote: bool = False
    retried: bool = False
    alias: str | None = None


_reads: contextvars.ContextVar[_Reads | None] = contextvars.ContextVar("replica_reads", default=None)


@dataclass(frozen=True)
class _Health:
    checked_at: float
    healthy: bool


_health: dict[str, _Health] = {}
_health_lock = threading.Lock()


def _lag(alias: str) -> float | None:
    """The replica's lag in seconds; None when it cannot be reached."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute(LAG_SQL)
            row = cursor.fetchone()
        return float(row[0])
    except DatabaseError:
        _close(alias)
        return None


def _close(alias: str) -> None:
    try:
        connections[alias].close()
    except DatabaseError:
        pass  # already broken: the next use opens a new one


def _healthy(alias: str) -> bool:
    health = _health.get(alias)
    if health is not None and time.monotonic() - health.checked_at < settings.DATABASE_REPLICA_CHECK_INTERVAL:
        return health.healthy
    lag = _lag(alias)
    healthy = lag is not None and lag <= settings.DATABASE_REPLICA_MAX_LAG
    with _health_lock:
        was = _health.get(alias)
        _health[alias] = _Health(time.monotonic(), healthy)
    if was is None or was.healthy != healthy:
        if healthy:
            logger.info("read replica %s is in use", alias)
        else:
            reason = (
                "unreachable"
                if lag is None
                else f"{lag:.1f} s behind (DATABASE_REPLICA_MAX_LAG {settings.DATABASE_REPLICA_MAX_LAG})"
            )
            logger.warning("read replica %s skipped: %s", alias, reason)
    return healthy


def mark_down(alias: str) -> None:
    """Skip `alias` until its next check (a query on it failed)."""
    with _health_lock:
        _health[alias] = _Health(time.monotonic(), False)
    _close(alias)


def forget_health() -> None:
    """Check every replica afresh on next use (tests change replicas under a running process)."""
    with _health_lock:
        _health.clear()


def healthy_replicas() -> list[str]:
    return [alias for alias in settings.DATABASE_REPLICAS if _healthy(alias)]


def read_alias() -> str:
    """The database this thread's reads go to now: a healthy replica when the rules above allow one, else the primary."""
    state = _reads.get()
    if state is None or not state.allowed or state.wrote or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    if state.alias is None:
        # One replica for the whole request, chosen at its first read: its reads see one replica's state.
        replicas = healthy_replicas()
        state.alias = random.choice(replicas) if replicas else DEFAULT_DB_ALIAS
    return state.alias


def read_connection() -> BaseDatabaseWrapper:
    """This thread's connection to `read_alias()`, for raw SQL that only reads."""
    return connections[read_alias()]


@contextmanager
def replica_reads() -> Iterator[None]:
    """Let the reads inside go to a replica, outside a request (the middleware does this for marked views)."""
    if not settings.DATABASE_REPLICAS:
        yield
        return
    token = _reads.set(_Reads(allowed=True))
    try:
        yield
    finally:
        _reads.reset(token)


def reads_from_replica(view: F) -> F:
    """Mark a page view whose reads may go to a replica (an API view sets `replica_reads = True`)."""
    view.replica_reads = True  # type: ignore[attr-defined]
    return view


def _marked(view: Callable[..., Any]) -> bool:
    owner = getattr(view, "cls", None) or getattr(view, "view_class", None) or view
    return bool(getattr(owner, "replica_reads", False))


def _pin_key(request: HttpRequest) -> str:
    """The client's credential, hashed: its API token, or its session cookie."""
    credential = request.headers.get("Authorization", "") or request.COOKIES.get(settings.SESSION_COOKIE_NAME, "")
    return f"replica-pin:{hashlib.sha256(credential.encode()).hexdigest()}" if credential else ""


class ReplicaRouter:
    """Reads where `read_alias()` says, writes to the primary; migrations run on the primary only."""

    def db_for_read(self, model: type, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS if model._meta.label_lower in PRIMARY_MODELS else read_alias()  # type: ignore[attr-defined]

    def db_for_write(self, model: type, **hints: Any) -> str:
        state = _reads.get()
        if state is not None and model._meta.label_lower not in UNPINNED_MODELS:  # type: ignore[attr-defined]
            state.wrote = True
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replicas are copies of the primary: every row relates across them

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


class ReplicaMiddleware:
    """Routes each request's reads (see the module's rules), pins a client that wrote, retries a replica's failure."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not settings.DATABASE_REPLICAS:
            return self.get_response(request)
        state = _Reads(pin_key=_pin_key(request))
        token = _reads.set(state)
        try:
            response = self.get_response(request)
        finally:
            _reads.reset(token)
        _pin_if_wrote(state)
        return response

    def process_view(self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any) -> None:
        state = _reads.get()
        if state is None or state.retried or not _marked(view):
            return None
        if state.pin_key and cache.get(state.pin_key):
            return None
        try:
            # Read (and kept) now, so a retry on the primary can parse the body again.
            request.body  # noqa: B018
        except RequestDataTooBig:
            return None  # the view answers 413; nothing to retry
        state.allowed = True
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponseBase | None:
        return self.get_response(request) if _moved_to_primary(exception) else None


def _pin_if_wrote(state: _Reads) -> None:
    if state.wrote and state.pin_key:
        cache.set(state.pin_key, True, settings.DATABASE_REPLICA_PIN_SECONDS)


def _moved_to_primary(exception: BaseException) -> bool:
    """Whether `exception` is the connection failure of this request's replica, met for the first time: if so the
    replica is skipped until its next check and the request's reads go to the primary from now on."""
    state = _reads.get()
    if (
        state is None
        or state.retried
        or state.alias in (None, DEFAULT_DB_ALIAS)
        or not isinstance(exception, (OperationalError, InterfaceError))
    ):
        return False
    failed = state.alias
    assert failed is not None
    logger.warning("read replica %s failed (%s); answering from the primary", failed, exception)
    mark_down(failed)
    state.allowed, state.alias, state.retried = False, None, True
    return True


def retry_on_primary(call: Callable[[], T]) -> T:
    """`call()`, made again on the primary if it fails on the request's replica (an MCP tool, which answers its
    failures itself, so the middleware never sees them)."""
    try:
        return call()
    except (OperationalError, InterfaceError) as exc:
        if not _moved_to_primary(exc):
            raise
    return call()
