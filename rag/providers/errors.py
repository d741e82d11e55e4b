"""Provider failures, one family for embeddings, answers and reranking, split by whether trying again can help."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


class ProviderError(Exception):
    """A failed call to an embedding, LLM or rerank provider.

    `transient` tells the retry layer whether the same call may succeed later; `retry_after` is a
    server's Retry-After in seconds, when it sent one.
    """

    transient: bool = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientProviderError(ProviderError):
    """Rate limits, 5xx, timeouts, lost connections: the same request may succeed later."""

    transient = True


class PermanentProviderError(ProviderError):
    """Bad credentials, unknown model, rejected input, an unreadable answer: retrying sends the same failure again."""

    transient = False


class DimensionMismatchError(PermanentProviderError):
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
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
