"""/team/groups for team admins, and /account/tokens for everyone signed in: a token's secret is shown once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from documents.models import CollectionMembership
from permissions.models import ApiToken, Group, GroupMembership, Role, TeamRole, TokenScope
from permissions.services import api_token_create
from tests.conftest import Cast, SignIn
from tests.factories import GroupFactory, GroupMembershipFactory

SECRET = re.compile(r'value="(cairn_[0-9a-f]{12}_[^"]+)"')


@pytest.fixture
def ops(cast: Cast) -> Group:
    group = GroupFactory.create(team=cast.alice.team, name="Ops")
    GroupMembershipFactory.create(group=group, user=cast.bob)
    return group


def test_a_team_admin_sees_the_teams_groups_and_their_member_counts(signed_in: SignIn, cast: Cast, ops: Group) -> None:
    GroupFactory.create(team=cast.charlie.team, name="Their group")
    html = signed_in(cast.alice).get("/team/groups").content.decode()
    assert "Ops" in html and "1 member<" in html and "Their group" not in html
    assert 'href="/team/collections"' in html  # the way to share collections with the groups


def test_a_member_who_is_not_admin_gets_the_403_page_even_for_a_group_they_are_in(
    signed_in: SignIn, cast: Cast, ops: Group
) -> None:
    client = signed_in(cast.bob)
    assert client.get("/team/groups").status_code == 403
    assert client.get(f"/team/groups/{ops.pk}").status_code == 403
    assert client.post(f"/team/groups/{ops.pk}/delete").status_code == 403
    assert Group.objects.filter(pk=ops.pk).exists()


def test_another_teams_group_is_the_404_page(signed_in: SignIn, cast: Cast, ops: Group) -> None:
    client = signed_in(cast.charlie)
    assert client.get(f"/team/groups/{ops.pk}").status_code == 404
    assert client.post(f"/team/groups/{ops.pk}/members", {"user": str(cast.charlie.pk)}).status_code == 404
    assert not GroupMembership.objects.filter(user=cast.charlie).exists()


def test_creating_a_group_then_adding_and_removing_a_member(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    response = client.post("/team/groups", {"name": "Support"})
    support = Group.objects.get(team=cast.alice.team, name="Support")
    assert response.status_code == 302 and response["Location"] == f"/team/groups/{support.pk}"
    client.post(f"/team/groups/{support.pk}/members", {"user": str(cast.bob.pk)})
    assert list(support.members.all()) == [cast.bob]
    client.post(f"/team/groups/{support.pk}/members", {"user": str(cast.bob.pk), "remove": "1"})
    assert list(support.members.all()) == []


def test_a_taken_group_name_is_shown_under_the_field(signed_in: SignIn, cast: Cast, ops: Group) -> None:
    response = signed_in(cast.alice).post("/team/groups", {"name": "ops"})
    assert response.status_code == 400
    assert "your team already has a group named &quot;ops&quot;." in response.content.decode()


def test_renaming_a_group(signed_in: SignIn, cast: Cast, ops: Group) -> None:
    assert signed_in(cast.alice).post(f"/team/groups/{ops.pk}", {"name": "Operations"}).status_code == 302
    ops.refresh_from_db()
    assert ops.name == "Operations"


def test_a_group_page_links_the_collections_shared_with_it(signed_in: SignIn, cast: Cast, ops: Group) -> None:
    CollectionMembership.objects.create(collection=cast.private, group=ops, role=Role.READ)
    html = signed_in(cast.alice).get(f"/team/groups/{ops.pk}").content.decode()
    assert f'href="/team/collections/{cast.private.pk}">Private</a>' in html


def test_the_group_delete_confirmation_names_the_collections_it_loses_then_deletes(
    signed_in: SignIn, cast: Cast, ops: Group
) -> None:
    CollectionMembership.objects.create(collection=cast.private, group=ops, role=Role.READ)
    client = signed_in(cast.alice)
    html = client.get(f"/team/groups/{ops.pk}/delete").content.decode()
    assert "These collections are no longer shared with them through it: Private." in html
    assert "No document is deleted." in html and Group.objects.filter(pk=ops.pk).exists()
    response = client.post(f"/team/groups/{ops.pk}/delete")
    assert response.status_code == 302 and response["Location"] == "/team/groups"
    assert not Group.objects.filter(pk=ops.pk).exists()


def test_a_new_token_is_shown_once_and_works(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.bob)
    response = client.post("/account/tokens", {"name": "laptop", "scope": "read", "expires": "30"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    match = SECRET.search(response.content.decode())
    assert match is not None
    secret = match.group(1)
    token = ApiToken.objects.get(user=cast.bob, name="laptop")
    assert (token.scope, token.parent_id) == (TokenScope.READ, None)
    assert token.expires_at is not None and timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    listing = client.get("/account/tokens").content.decode()
    assert secret not in listing and f"{token.prefix}…" in listing
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.post("/api/documents.list", {}, content_type="application/json").status_code == 200


def test_a_read_only_member_is_offered_no_token_and_cannot_post_one(signed_in: SignIn, cast: Cast) -> None:
    cast.bob.role = TeamRole.READ_ONLY
    cast.bob.save()
    client = signed_in(cast.bob)
    page = client.get("/account/tokens").content.decode()
    assert 'id="create-token"' not in page and "read-only member" in page
    response = client.post("/account/tokens", {"name": "laptop", "scope": "read", "expires": "30"})
    assert response.status_code == 403 and not ApiToken.objects.filter(user=cast.bob).exists()


def test_a_token_that_never_expires_is_offered_and_created(signed_in: SignIn, cast: Cast) -> None:
    signed_in(cast.bob).post("/account/tokens", {"name": "ci", "scope": "write", "expires": "never"})
    token = ApiToken.objects.get(user=cast.bob, name="ci")
    assert (token.scope, token.expires_at) == (TokenScope.WRITE, None)


def test_expiries_beyond_the_longest_allowed_are_not_offered(signed_in: SignIn, cast: Cast, settings: Settings) -> None:
    settings.API_TOKEN_MAX_DAYS = 90
    client = signed_in(cast.bob)
    assert 'value="365"' not in client.get("/account/tokens").content.decode()
    assert client.post("/account/tokens", {"scope": "read", "expires": "365"}).status_code == 400
    assert not ApiToken.objects.filter(user=cast.bob).exists()


def test_the_list_shows_when_a_token_was_last_used_and_revoking_it_refuses_it(signed_in: SignIn, cast: Cast) -> None:
    issued = api_token_create(user=cast.bob, name="script")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    api.post("/api/documents.list", {}, content_type="application/json")
    client = signed_in(cast.bob)
    last_used = ApiToken.objects.get(pk=issued.token.pk).last_used_at
    assert last_used is not None
    assert f"last used {timezone.localtime(last_used):%Y-%m-%d %H:%M}" in client.get("/account/tokens").content.decode()
    response = client.post(f"/account/tokens/{issued.token.pk}/revoke")
    assert response.status_code == 302 and response["Location"] == "/account/tokens"
    assert api.post("/api/documents.list", {}, content_type="application/json").status_code == 401
    assert ">revoked<" in client.get("/account/tokens").content.decode()


def test_someone_elses_token_is_the_404_page_and_stays_live(signed_in: SignIn, cast: Cast) -> None:
    alices = api_token_create(user=cast.alice).token
    assert signed_in(cast.bob).post(f"/account/tokens/{alices.pk}/revoke").status_code == 404
    assert ApiToken.objects.get(pk=alices.pk).revoked_at is None


def test_the_tokens_page_needs_signing_in_and_the_header_links_it(client: Client, signed_in: SignIn, cast: Cast) -> None:
    assert client.get("/account/tokens")["Location"].startswith("/login")
    assert '<a href="/account/tokens">Tokens</a>' in signed_in(cast.bob).get("/rag").content.decode()


def test_the_team_pages_link_each_other_members_included(signed_in: SignIn, cast: Cast) -> None:
    client = signed_in(cast.alice)
    for page, others in (("/team/members", ("/team/collections", "/team/groups")), ("/team/groups", ("/team/members",))):
        html = client.get(page).content.decode()
        nav = html.split('aria-label="Team administration">', 1)[1].split("</nav>", 1)[0]
        assert all(f'href="{other}"' in nav for other in others), (page, nav)
