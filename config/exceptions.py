"""One DRF exception handler: every error leaves as {"error": code, "message": ...}."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from config.errors import ApplicationError, error_body


def first_message(detail: Any) -> str:
    """The first error of a DRF `detail` (a string, or lists and dicts of them), prefixed by its field."""
    if isinstance(detail, dict):
        field, value = next(iter(detail.items()))
        inner = first_message(value)
        return inner if field == "non_field_errors" else f"{field}: {inner}"
    if isinstance(detail, list) and detail:
        return first_message(detail[0])
    return str(detail)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("request_too_large", f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, (TooManyFilesSent, TooManyFieldsSent)):
        # Django's multipart parser raises these as SuspiciousOperation, which would leave as an HTML page.
        what = "files" if isinstance(exc, TooManyFilesSent) else "fields"
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES if what == "files" else settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return Response(
            error_body("validation_error", f"Too many {what} in one request (at most {limit}); send a ZIP archive instead."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        return None
    assert isinstance(exc, exceptions.APIException), "DRF's handler answers only its own exceptions"

    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        code, message = "unauthorized", first_message(exc.detail)
        response.status_code = status.HTTP_401_UNAUTHORIZED
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    elif isinstance(exc, exceptions.Throttled):
        code, message = "rate_limited", first_message(exc.detail)
    elif isinstance(exc, exceptions.PermissionDenied):
        code, message = "forbidden", first_message(exc.detail)
    elif isinstance(exc, exceptions.NotFound):
        code, message = "not_found", "Not found."
    elif isinstance(exc, (exceptions.ValidationError, exceptions.ParseError, exceptions.UnsupportedMediaType)):
        code, message = "validation_error", first_message(exc.detail)
        response.status_code = status.HTTP_400_BAD_REQUEST
    elif isinstance(exc, exceptions.MethodNotAllowed):
        code, message = "method_not_allowed", first_message(exc.detail)
    elif isinstance(exc, exceptions.NotAcceptable):
        code, message = "not_acceptable", "This API answers in JSON only (Accept: application/json)."
    else:
        code, message = "api_error", first_message(exc.detail)
    response.data = error_body(code, message)
    return response
