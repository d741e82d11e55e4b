"""The only retry layer for embedding calls (litellm's and httpx's own retries are switched off).

Exponential backoff with full jitter: attempt n sleeps uniform(0, min(CAP, BASE * 2**n)) seconds,
but never less than a server's Retry-After.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from rag.providers.errors import TransientEmbeddingError

logger = logging.getLogger(__name__)

T = TypeVar("T")

BASE_DELAY = 0.5
MAX_DELAY = 30.0
# A longer Retry-After is raised at once: blocking a worker for minutes is worse than letting
# the caller (a Celery task) reschedule itself using the error's retry_after.
MAX_RETRY_AFTER = 300.0

# Module attributes rather than imports-by-name so tests can monkeypatch them and never really sleep.
sleep: Callable[[float], None] = time.sleep
jitter: Callable[[float, float], float] = random.uniform


def backoff_delay(attempt: int, retry_after: float | None) -> float:
    delay = jitter(0.0, min(MAX_DELAY, BASE_DELAY * 2**attempt))
    return max(delay, retry_after) if retry_after is not None else delay


def call_with_retries(call: Callable[[], T], *, max_retries: int) -> T:
    """Run `call`, retrying TransientEmbeddingError up to `max_retries` times; anything else propagates at once."""
    attempt = 0
    while True:
        try:
            return call()
        except TransientEmbeddingError as exc:
            if attempt >= max_retries or (exc.retry_after or 0.0) > MAX_RETRY_AFTER:
                raise
            delay = backoff_delay(attempt, exc.retry_after)
            logger.warning("Embedding call failed (%s); retry %d/%d in %.2fs", exc, attempt + 1, max_retries, delay)
            sleep(delay)
            attempt += 1
