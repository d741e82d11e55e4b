"""Tokens created by tokens: never outliving, out-scoping or surviving the token that created them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from pytest_django import Settings

from permissions.models import ApiToken, TokenScope
from permissions.services import api_token_create
from tests.conftest import Api, Cast, SignIn
from tests.factories import UserFactory


def mint(api: Api, **body: Any) -> dict[str, Any]:
    response = api.post("apiKeys.create", body)
    assert response.status_code == 200, response.content
    return response.json()["data"]


def expiry(token: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(token["expiresAt"])


def parent_token(cast: Cast, *, days: float | None = None, scope: str = TokenScope.WRITE) -> tuple[ApiToken, Api]:
    expires_at = timezone.now() + timedelta(days=days) if days is not None else None
    issued = api_token_create(user=cast.bob, scope=scope, name="parent", expires_at=expires_at)
    return issued.token, Api(issued.plaintext)


def test_a_token_minted_without_an_expiry_by_an_expiring_token_expires_with_it(cast: Cast) -> None:
    parent, api = parent_token(cast, days=1)
    child = mint(api, name="child", scope="write")
    assert parent.expires_at is not None and expiry(child) <= parent.expires_at


def test_a_token_minted_by_a_token_that_never_expires_expires_within_the_maximum_lifetime(cast: Cast, settings: Settings) -> None:
    settings.API_TOKEN_MAX_DAYS = 30
    _, api = parent_token(cast)
    child = mint(api, name="child")
    assert timezone.now() + timedelta(days=29) < expiry(child) <= timezone.now() + timedelta(days=30)


def test_a_token_may_not_mint_one_that_outlives_it(cast: Cast) -> None:
    _, api = parent_token(cast, days=1)
    later = (timezone.now() + timedelta(days=2)).isoformat()
    response = api.post("apiKeys.create", {"name": "child", "expiresAt": later})
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert "expiresAt: must not be later than" in response.json()["message"]
    assert not ApiToken.objects.filter(name="child").exists()


def test_a_token_may_mint_one_that_expires_sooner(cast: Cast) -> None:
    parent, api = parent_token(cast, days=2)
    sooner = timezone.now() + timedelta(days=1)
    child = mint(api, name="child", expiresAt=sooner.isoformat())
    assert abs(expiry(child) - sooner) < timedelta(seconds=1)
    assert child["parentId"] == str(parent.pk)


def test_a_read_token_cannot_mint_a_token_of_any_scope(cast: Cast) -> None:
    _, api = parent_token(cast, scope=TokenScope.READ)
    for scope in ("read", "write"):
        response = api.post("apiKeys.create", {"name": "child", "scope": scope})
        assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert not ApiToken.objects.filter(name="child").exists()


def test_the_service_refuses_a_wider_scope_than_the_parents(cast: Cast) -> None:
    from config.errors import Forbidden

    parent, _ = parent_token(cast, scope=TokenScope.READ)
    with pytest.raises(Forbidden):
        api_token_create(user=cast.bob, scope=TokenScope.WRITE, parent=parent)


def test_revoking_a_token_refuses_every_token_minted_from_it(cast: Cast) -> None:
    parent, api = parent_token(cast)
    child = mint(api, name="child", scope="write")
    child_api = Api(child["token"])
    grandchild = Api(mint(child_api, name="grandchild", scope="read")["token"])
    assert api.post("apiKeys.revoke", {"id": str(parent.pk)}).status_code == 200
    for descendant in (child_api, grandchild):
        response = descendant.post("documents.list")
        assert response.status_code == 401 and "revoked" in response.json()["message"]


def test_revoking_a_token_shows_the_tokens_minted_from_it_as_revoked(cast: Cast) -> None:
    parent, api = parent_token(cast)
    child = mint(api, name="child")
    Api(api_token_create(user=cast.bob, scope=TokenScope.WRITE).plaintext).post("apiKeys.revoke", {"id": str(parent.pk)})
    assert ApiToken.objects.get(pk=child["id"]).revoked_at is not None


def test_revoking_a_token_leaves_its_parent_and_siblings_alone(cast: Cast) -> None:
    parent, api = parent_token(cast)
    child, sibling = mint(api, name="child"), mint(api, name="sibling")
    assert api.post("apiKeys.revoke", {"id": child["id"]}).status_code == 200
    assert api.post("documents.list").status_code == 200
    assert Api(sibling["token"]).post("documents.list").status_code == 200


def test_revoking_in_the_admin_refuses_the_tokens_minted_from_it(cast: Cast, signed_in: SignIn) -> None:
    parent, api = parent_token(cast)
    child = Api(mint(api, name="child")["token"])
    operator = UserFactory.create(team=None, is_staff=True, is_superuser=True)
    response = signed_in(operator).post(
        "/admin/permissions/apitoken/", {"action": "revoke", "_selected_action": [str(parent.pk)]}
    )
    assert response.status_code == 302
    assert child.post("documents.list").status_code == 401


@pytest.mark.parametrize("lapse", ["revoked", "expired"])
def test_a_token_whose_parent_lapsed_by_any_other_path_is_refused(cast: Cast, lapse: str) -> None:
    """An operator editing a row in the admin or the database: the ancestors are checked at every request."""
    parent, api = parent_token(cast, days=10)
    child = Api(mint(api, name="child")["token"])
    field = {"revoked": "revoked_at", "expired": "expires_at"}[lapse]
    ApiToken.objects.filter(pk=parent.pk).update(**{field: timezone.now()})
    response = child.post("documents.list")
    assert response.status_code == 401 and lapse in response.json()["message"]


def test_a_token_whose_grandparent_was_revoked_is_refused(cast: Cast) -> None:
    parent, api = parent_token(cast)
    child = Api(mint(api, name="child", scope="write")["token"])
    grandchild = Api(mint(child, name="grandchild")["token"])
    ApiToken.objects.filter(pk=parent.pk).update(revoked_at=timezone.now())
    assert grandchild.post("documents.list").status_code == 401


def test_deleting_a_token_deletes_the_tokens_minted_from_it(cast: Cast) -> None:
    parent, api = parent_token(cast)
    child = mint(api, name="child")
    ApiToken.objects.filter(pk=parent.pk).delete()
    assert not ApiToken.objects.filter(pk=child["id"]).exists()
    assert Api(child["token"]).post("documents.list").status_code == 401


def test_deactivating_the_user_refuses_the_tokens_minted_from_theirs(cast: Cast) -> None:
    _, api = parent_token(cast)
    child = Api(mint(api, name="child")["token"])
    cast.bob.is_active = False
    cast.bob.save(update_fields=["is_active"])
    assert child.post("documents.list").status_code == 401


def test_a_token_a_person_creates_on_a_signed_in_session_has_no_parent_and_may_never_expire(
    cast: Cast, signed_in: SignIn
) -> None:
    response = signed_in(cast.bob).post("/api/apiKeys.create", {"name": "mine"}, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["data"]["expiresAt"] is None and response.json()["data"]["parentId"] is None


def test_a_token_the_command_creates_has_no_parent_and_may_never_expire(cast: Cast, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("create_token", "bob", "--scope", "write")
    token = ApiToken.objects.get(user=cast.bob)
    assert (token.parent_id, token.expires_at) == (None, None)
