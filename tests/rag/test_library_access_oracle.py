"""The randomized access oracle over the pages and endpoints that browse and manage collections: nobody sees an
id, title or count of a document or collection the policy (tests/access_matrix.py, written apart from the ORM)
keeps from them."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client

from permissions.models import TokenScope
from tests.access_matrix import build_random_matrix, oracle_sees
from tests.conftest import ApiFor

DOC_LINK = re.compile(r'href="/doc/([0-9a-f-]{36})')
COLLECTION_LINK = re.compile(r'href="/collections/([0-9a-f-]{36})"')


def oracle_reads_collection(user, collection, group_members, coll_users, coll_groups) -> bool:
    user_groups = {g for g, members in group_members.items() if user.pk in members}
    return (
        collection.team_id == user.team_id
        and collection.deleted_at is None
        and (
            collection.default_access != "none"
            or user.pk in coll_users[collection.pk]
            or bool(user_groups & coll_groups[collection.pk])
        )
    )


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [11, 12])
def test_browse_pages_and_collection_endpoints_show_only_what_the_oracle_allows(api_for: ApiFor, seed: int) -> None:
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(
        seed, teams=2, users=6, documents=40
    )
    world = (collections, group_members, coll_users, coll_groups, doc_users)
    shown_anywhere = 0
    outcomes: set[bool] = set()
    for user in users[:4]:
        client = Client()
        client.force_login(user)
        readable_docs = {str(d.pk) for d in docs if oracle_sees(user, d, *world, include_archived=False)}
        readable_collections = {
            str(pk) for pk, c in collections.items() if oracle_reads_collection(user, c, group_members, coll_users, coll_groups)
        }
        page = client.get("/documents?page=1").content.decode()
        listed = set(DOC_LINK.findall(page))
        assert listed <= readable_docs, ("/documents lists a document the oracle keeps from", user.username)
        assert set(COLLECTION_LINK.findall(page)) <= readable_collections, user.username
        shown_anywhere += len(listed)
        api = api_for(user, TokenScope.READ)
        for pk in collections:
            readable = str(pk) in readable_collections
            outcomes.add(readable)
            status = client.get(f"/collections/{pk}").status_code
            assert status == (200 if readable else 404), ("/collections", user.username, pk, status)
            info = api.post("collections.info", {"id": str(pk)})
            assert info.status_code == (200 if readable else 404), ("collections.info", user.username, pk)
            if readable:
                in_collection = set(DOC_LINK.findall(client.get(f"/collections/{pk}").content.decode()))
                assert in_collection <= readable_docs, ("/collections lists", user.username, pk)
        assert api.post("collections.info", {"id": str(uuid.uuid4())}).status_code == 404
    assert shown_anywhere > 0, "the matrix must let someone read something, or the test proves nothing"
    assert outcomes == {True, False}, "both readable and unreadable collections were tried"
