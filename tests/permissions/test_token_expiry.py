"""Token expiry: in the future, with a time zone, and bounded, through the API and the command."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from permissions.models import ApiToken
from tests.conftest import ApiFor, Cast


@pytest.mark.parametrize(
    ("expires_at", "message"),
    [
        ("2020-01-01T00:00:00Z", "expiresAt: must be in the future."),
        ("2099-01-01T00:00:00", "expiresAt: must include a time zone, e.g. 2027-01-31T00:00:00Z."),
        ("9999-12-31T00:00:00Z", "expiresAt: must be at most 3650 days from now."),
        ("2027-13-45T00:00:00", None),
        ("tomorrow", None),
    ],
)
def test_a_token_expiry_in_the_past_without_a_time_zone_or_too_far_is_refused(
    cast: Cast, api_for: ApiFor, expires_at: str, message: str | None
) -> None:
    bob = api_for(cast.bob)
    before = ApiToken.objects.count()
    response = bob.post("apiKeys.create", {"name": "ci", "expiresAt": expires_at})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "validation_error"
    if message:
        assert response.json()["message"] == message
    assert ApiToken.objects.count() == before


def test_a_token_expiring_next_month_is_created(cast: Cast, api_for: ApiFor) -> None:
    expires = (timezone.now() + timedelta(days=30)).isoformat()
    response = api_for(cast.bob).post("apiKeys.create", {"name": "ci", "expiresAt": expires})
    assert response.status_code == 200 and response.json()["data"]["expiresAt"]


def test_create_token_with_an_absurd_lifetime_fails_with_a_clear_message(cast: Cast) -> None:
    with pytest.raises(CommandError, match=r"--expires-in-days must be between 1 and 3650"):
        call_command("create_token", "bob", "--expires-in-days", "100000000")
