"""Feedback on answers: a user rates their own."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from config.errors import NotFound
from permissions.models import User
from rag.models import Feedback, QueryLog


@transaction.atomic
def feedback_create(*, user: User, answer_id: uuid.UUID, rating: int, comment: str = "") -> Feedback:
    """Rate one of the user's own answers; a second rating replaces the first (one per answer)."""
    query_log = QueryLog.objects.select_for_update().filter(pk=answer_id, user=user).first()
    if query_log is None:
        raise NotFound("Answer not found.")
    # The answer's row is locked, so two ratings sent at once update one feedback instead of racing to insert two.
    feedback = Feedback.objects.filter(query_log=query_log, user=user).first() or Feedback(query_log=query_log, user=user)
    feedback.rating, feedback.comment, feedback.created_at = rating, comment, timezone.now()
    feedback.full_clean(validate_constraints=False)
    feedback.save()
    return feedback
