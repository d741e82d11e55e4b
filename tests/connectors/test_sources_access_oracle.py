"""The randomized access oracle over sources: nobody but a source's owner and its team's admins sees its name,
configuration or errors, nobody at all its secrets, and its documents only as the document policy allows."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from permissions.models import TokenScope, User
from rag.mcp.tools import Caller, call
from tests.access_matrix import build_random_matrix, build_random_sources, oracle_sees, oracle_sees_source
from tests.conftest import ApiFor


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [21])
def test_sources_show_only_what_the_oracle_allows(api_for: ApiFor, seed: int) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(
        seed, teams=2, users=6, documents=12
    )
    sources, private = build_random_sources(seed, users, collections, docs)
    world = (collections, group_members, coll_users, coll_groups, doc_users)
    secrets = [f"secret-token-{seed}x"]
    outcomes: set[bool] = set()
    for user in User.objects.filter(pk__in=[u.pk for u in users[:4]]):
        api = api_for(user, TokenScope.READ)
        visible = {s.pk for s in sources if oracle_sees_source(user, s)}
        hidden_strings = [text for pk, texts in private.items() if pk not in visible for text in texts]
        bodies = []

        listed = api.post("sources.list", {"limit": 100})
        assert {s["id"] for s in listed.json()["data"]} == {str(pk) for pk in visible}, user.username
        bodies.append(listed.content.decode())
        tool = call("list_sources", caller=Caller(user=user, can_write=False), arguments={"limit": 100})
        assert {s["id"] for s in tool["data"]} == {str(pk) for pk in visible}, ("list_sources", user.username)
        bodies.append(str(tool))
        for source in sources:
            seen = source.pk in visible
            outcomes.add(seen)
            for endpoint in ("sources.info", "sources.syncs")[: 1 + (source.pk.int % 2)]:
                response = api.post(endpoint, {"id": str(source.pk)})
                assert response.status_code == (200 if seen else 404), (endpoint, user.username, source.name)
                bodies.append(response.content.decode())
        client = Client()
        client.force_login(user)
        bodies.append(client.get("/sources").content.decode())
        for document in docs[::4]:  # the document policy has its own oracle; these are documents sources wrote
            expected = 200 if oracle_sees(user, document, *world, include_archived=True) else 404
            assert api.post("documents.info", {"id": str(document.pk)}).status_code == expected
        assert api.post("sources.info", {"id": str(uuid.uuid4())}).status_code == 404
        everything = "\n".join(bodies)
        leaks = [text for text in hidden_strings + secrets if text in everything]
        assert leaks == [], (user.username, leaks)
    assert outcomes == {True, False}, "both visible and hidden sources were tried"
