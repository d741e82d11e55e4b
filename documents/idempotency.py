"""`Idempotency-Key` on writes that create: a client's retry returns the first response instead of a duplicate.

The key's row is inserted in the same transaction as the write. A concurrent retry with the same key
waits on the row's unique index until the first commits, then replays its response; a write that
fails rolls back with its key, so a retry is free to try again. The same key with another body is a
client bug: `idempotency_key_reused` (422). Keys expire after IDEMPOTENCY_KEY_TTL hours.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from config.errors import ApplicationError, ValidationFailed
from documents.models import IdempotentRequest
from permissions.models import User

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_KEY = re.compile(r"[\x21-\x7e]{1,255}")

SCHEMA_PARAMETER = OpenApiParameter(
    HEADER,
    type=str,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (a UUID) per intended write: a retry with the same key and body returns the first "
        "response (with `Idempotent-Replayed: true`) instead of writing again; another body is refused (422)."
    ),
)


class IdempotencyKeyReused(ApplicationError):
    code = "idempotency_key_reused"
    status = 422


def _body_hash(request: Request) -> str | None:
    """The parsed body's digest, or None when it does not parse (the view then answers the error)."""
    try:
        body = request.data
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except Exception:
        return None
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotent(post: Callable[..., Response]) -> Callable[..., Response]:
    """Make an RPC view's `post` honour `Idempotency-Key`."""

    @wraps(post)
    def wrapped(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return post(view, request, *args, **kwargs)
        if not _KEY.fullmatch(key):
            raise ValidationFailed(f"{HEADER} must be 1 to 255 printable ASCII characters without spaces.")
        digest = _body_hash(request)
        if digest is None:
            return post(view, request, *args, **kwargs)
        user = request.user
        assert isinstance(user, User), "write endpoints are authenticated"
        with transaction.atomic():
            cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_TTL)
            # Forget this user's expired keys as they write (the unique index's user prefix finds them).
            IdempotentRequest.objects.filter(user=user, created_at__lt=cutoff).delete()
            record, created = IdempotentRequest.objects.get_or_create(
                user=user, endpoint=request.path, key=key, defaults={"request_hash": digest}
            )
            if not created:
                if record.request_hash != digest:
                    raise IdempotencyKeyReused(f"This {HEADER} was used with a different request body; use a new key.")
                return Response(record.response, status=record.status, headers={REPLAYED_HEADER: "true"})
            response = post(view, request, *args, **kwargs)
            record.status, record.response = response.status_code, response.data
            record.save(update_fields=["status", "response"])
            return response

    return wrapped
