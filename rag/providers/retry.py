"""The only retry layer for provider calls: embeddings, answers and reranking.

LiteLLM's, the OpenAI SDK's and httpx's own retries are switched off, so a failure is retried
here and nowhere else. Exponential backoff with full jitter: attempt n sleeps
uniform(0, min(cap, base * 2**n)) seconds, but never less than a server's Retry-After.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from config.metrics import PROVIDER_RETRIES
from rag.providers.errors import ProviderError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Module attributes rather than imports-by-name so tests can monkeypatch them and never really sleep.
sleep: Callable[[float], None] = time.sleep
jitter: Callable[[float, float], float] = random.uniform


@dataclass(frozen=True)
class Backoff:
    base: float
    cap: float
    # A longer Retry-After is raised at once: blocking for minutes is worse than letting the
    # caller (a Celery task, a reader) come back later.
    max_retry_after: float

    def delay(self, attempt: int, retry_after: float | None) -> float:
        delay = jitter(0.0, min(self.cap, self.base * 2**attempt))
        return max(delay, retry_after) if retry_after is not None else delay


# Indexing can wait; a person waiting for an answer cannot.
BATCH = Backoff(base=0.5, cap=30.0, max_retry_after=300.0)
INTERACTIVE = Backoff(base=0.25, cap=2.0, max_retry_after=10.0)


def _should_retry(exc: ProviderError, attempt: int, max_retries: int, backoff: Backoff) -> bool:
    return exc.transient and attempt < max_retries and (exc.retry_after or 0.0) <= backoff.max_retry_after


def _count_retry(metric: tuple[str, str] | None) -> None:
    if metric is not None:
        PROVIDER_RETRIES.labels(*metric).inc()


def call_with_retries(
    call: Callable[[], T], *, max_retries: int, what: str, backoff: Backoff = BATCH, metric: tuple[str, str] | None = None
) -> T:
    """Run `call`, retrying transient ProviderErrors up to `max_retries` times; anything else propagates at once.

    `metric` is the (kind, model) each retry is counted under in `cairn_provider_retries_total`.
    """
    attempt = 0
    while True:
        try:
            return call()
        except ProviderError as exc:
            if not _should_retry(exc, attempt, max_retries, backoff):
                raise
            delay = backoff.delay(attempt, exc.retry_after)
            logger.warning("%s failed (%s); retry %d/%d in %.2fs", what, exc, attempt + 1, max_retries, delay)
            _count_retry(metric)
            sleep(delay)
            attempt += 1


def stream_with_retries(
    open_stream: Callable[[], Iterator[str]],
    *,
    max_retries: int,
    what: str,
    backoff: Backoff = INTERACTIVE,
    metric: tuple[str, str] | None = None,
) -> Iterator[str]:
    """Yield from the stream `open_stream()` makes, retrying transient failures before its first piece.

    Once text has been yielded it has reached the reader, so a later failure is raised, not retried.
    """
    attempt = 0
    while True:
        started = False
        try:
            for piece in open_stream():
                started = True
                yield piece
            return
        except ProviderError as exc:
            if started or not _should_retry(exc, attempt, max_retries, backoff):
                raise
            delay = backoff.delay(attempt, exc.retry_after)
            logger.warning("%s failed before any text (%s); retry %d/%d in %.2fs", what, exc, attempt + 1, max_retries, delay)
            _count_retry(metric)
            sleep(delay)
            attempt += 1
