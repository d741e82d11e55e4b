"""Feedback on answers: a user rates their own."""

from __future__ import annotations

import uuid

from django.db import transaction

from config.errors import NotFound
from permissions.models import User
from rag.models import Feedback, QueryLog


@transaction.atomic
def feedback_create(*, user: User, answer_id: uuid.UUID, rating: int, comment: str = "") -> Feedback:
    """Rate one of the user's own answers."""
    query_log = QueryLog.objects.filter(pk=answer_id, user=user).first()
    if query_log is None:
        raise NotFound("Answer not found.")
    feedback = Feedback(query_log=query_log, user=user, rating=rating, comment=comment)
    feedback.full_clean()
    feedback.save()
    return feedback
