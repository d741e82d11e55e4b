"""Embedding failures, split by whether trying again can help."""
from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime


class EmbeddingError(Exception):
    """Base class: `permanent` tells callers (retry loop, Celery tasks) whether to try again."""

    permanent: bool = False


class TransientEmbeddingError(EmbeddingError):
    """Rate limits, 5xx, timeouts, connection failures: the same request may succeed later."""

    permanent = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentEmbeddingError(EmbeddingError):
    """Bad credentials, unknown model, rejected input: retrying sends the same failure again."""

    permanent = True


class DimensionMismatchError(PermanentEmbeddingError):
    def __init__(self, model_id: str, returned: int, configured: int) -> None:
        super().__init__(
            f"Model {model_id} returned {returned}-dimensional vectors but RAG_EMBEDDING_DIMENSION is "
            f"{configured}; set RAG_EMBEDDING_DIMENSION={returned} or change the model"
        )
        self.returned = returned
        self.configured = configured


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
