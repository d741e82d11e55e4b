"""API tokens: stored as prefix and keyed digest only, refused when revoked or expired, issued by a command."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.forms.models import model_to_dict
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from permissions.authentication import token_with_user
from permissions.models import ApiToken
from permissions.services import api_token_create, api_token_revoke
from tests.conftest import ApiFor, Cast
from tests.factories import UserFactory


def test_tokens_are_never_stored_in_plain_text(db: None) -> None:
    issued = api_token_create(user=UserFactory.create())
    # cairn_<prefix>_<secret>: the secret is urlsafe base64, which may itself hold "_".
    secret = issued.plaintext.split("_", 2)[2]
    assert len(secret) >= 40
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM permissions_apitoken")
        rows = cursor.fetchall()
    dump = repr(rows)
    assert rows and issued.plaintext not in dump and secret not in dump


def test_a_revoked_or_expired_token_is_refused(db: None, api_for: ApiFor, cast: Cast) -> None:
    issued = api_token_create(user=cast.bob)
    from tests.conftest import Api

    api = Api(issued.plaintext)
    assert api.post("documents.list").status_code == 200
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at is not None
    api_token_revoke(token=issued.token)
    response = api.post("documents.list")
    assert response.status_code == 401 and "revoked" in response.json()["message"]

    expired = api_token_create(user=cast.bob, expires_at=timezone.now() + timedelta(minutes=1))
    ApiToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now())  # time passes
    response = Api(expired.plaintext).post("documents.list")
    assert response.status_code == 401 and "expired" in response.json()["message"]


def test_create_token_prints_a_working_token(db: None, cast: Cast, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("create_token", "bob", "--scope", "read")
    token = capsys.readouterr().out.strip()
    from tests.conftest import Api

    assert Api(token).post("documents.list").status_code == 200
    assert ApiToken.objects.get(user=cast.bob).scope == "read"


def test_the_token_lookup_loads_what_the_orm_would(
    db: None, cast: Cast, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    """One precompiled query for token, user and team: every field as the ORM reads it, a user without a team included."""
    for user in (cast.bob, UserFactory.create(team=None, is_staff=True)):
        issued = api_token_create(user=user)
        with django_assert_num_queries(1):
            found = token_with_user(issued.token.prefix)
            assert found is not None and (found.user.team is None or found.user.team.name)
        expected = ApiToken.objects.select_related("user", "user__team").get(pk=issued.token.pk)
        assert found is not None
        assert model_to_dict(found) == model_to_dict(expected)
        assert model_to_dict(found.user, exclude=["groups", "user_permissions"]) == model_to_dict(
            expected.user, exclude=["groups", "user_permissions"]
        )
        assert found.user.team == expected.user.team and (found.user.team is None) == (user.team_id is None)
        if expected.user.team is not None:
            assert found.user.team is not None and found.user.team.name == expected.user.team.name
    assert token_with_user("cairn_nosuchprefix") is None
