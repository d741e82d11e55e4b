"""The application's error family: each carries its API code and HTTP status, mapped once."""
from __future__ import annotations


class ApplicationError(Exception):
    code = "invalid_request"
    status = 400

    def __init__(self, message: str, *, extra: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}


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


class RagDisabled(ApplicationError):
    code = "rag_disabled"


class NoEmbeddings(ApplicationError):
    code = "no_embeddings"
    status = 404


class EmbeddingUnavailable(ApplicationError):
    code = "embedding_unavailable"
    status = 503
