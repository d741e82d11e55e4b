"""rag 0008: feedback ids become UUIDs and duplicate ratings of one answer by one user collapse to the latest."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.factories import UserFactory

pytestmark = [pytest.mark.upgrade, pytest.mark.django_db(transaction=True)]

BEFORE, AFTER = ("rag", "0008_knowledge_graph"), ("rag", "0009_feedback_uuid_one_per_answer")


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


def test_duplicate_ratings_keep_only_the_latest_and_every_id_becomes_a_uuid(cast):
    old = migrate(BEFORE)
    QueryLog, Feedback = old.get_model("rag", "QueryLog"), old.get_model("rag", "Feedback")
    bob = UserFactory.create(team=cast.alice.team, username="bob2")
    answer = QueryLog.objects.create(user_id=bob.pk, team_id=bob.team_id, query="q")
    other = QueryLog.objects.create(user_id=bob.pk, team_id=bob.team_id, query="r")
    now = timezone.now()
    Feedback.objects.create(query_log=answer, user_id=bob.pk, rating=1, comment="first", created_at=now - timedelta(minutes=2))
    Feedback.objects.create(query_log=answer, user_id=bob.pk, rating=5, comment="latest", created_at=now)
    Feedback.objects.create(query_log=other, user_id=bob.pk, rating=3, comment="only", created_at=now)
    try:
        migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, query_log_id, comment FROM rag_feedback ORDER BY comment")
            rows = cursor.fetchall()
        assert [(log_id, comment) for _, log_id, comment in rows] == [(answer.pk, "latest"), (other.pk, "only")]
        assert all(isinstance(pk, uuid.UUID) for pk, _, _ in rows)
    finally:
        call_command("migrate", verbosity=0)  # back to the latest state for the tests after this one
