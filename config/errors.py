"""The application's error family: each carries its API code and HTTP status, mapped once."""

from __future__ import annotations

from typing import Any


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape, `{"error": code, "message": ..., **extra}`, for responses and stream events alike."""
    return {"error": code, "message": message, **extra}


class ApplicationError(Exception):
    code = "invalid_request"
    status = 400

    def __init__(self, message: str, *, extra: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, **self.extra)


class InvalidQuery(ApplicationError):
    code = "invalid_query"


class ValidationFailed(ApplicationError):
    code = "validation_error"


class NotFound(ApplicationError):
    code = "not_found"
    status = 404


class Forbidden(ApplicationError):
    code = "forbidden"
    status = 403


class CollectionNotEmpty(ApplicationError):
    code = "collection_not_empty"
    status = 409


class RagDisabled(ApplicationError):
    code = "rag_disabled"


class NoEmbeddings(ApplicationError):
    code = "no_embeddings"
    status = 404


class EmbeddingUnavailable(ApplicationError):
    code = "embedding_unavailable"
    status = 503


class QueueUnavailable(ApplicationError):
    code = "queue_unavailable"
    status = 503


class StorageUnavailable(ApplicationError):
    code = "storage_unavailable"
    status = 503


class RequestTooLarge(ApplicationError):
    code = "request_too_large"
    status = 413
