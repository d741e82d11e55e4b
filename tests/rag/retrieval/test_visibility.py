"""search_scope: the policy in two shapes (an OR filter, and the UNION ALL of its two ways) selects one set."""

from __future__ import annotations

import pytest
from django.db import connection

from documents.models import Document
from rag.retrieval.visibility import search_scope
from tests.access_matrix import build_random_matrix, oracle_sees


def rows(sql: str, params: tuple) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, version, collection_id FROM ({sql}) v ORDER BY id", params)
        return cursor.fetchall()


@pytest.mark.parametrize("seed", [11, 12])
def test_both_shapes_of_a_scope_select_the_visible_documents_once_each(db, seed):
    users, docs, collections, group_members, coll_users, coll_groups, doc_users = build_random_matrix(seed, documents=200)
    Document.objects.filter(pk__in=[d.pk for d in docs[::7]]).update(tags=["ops"])
    compared = 0
    for user in users:
        allowed = {
            d.pk for d in docs if oracle_sees(user, d, collections, group_members, coll_users, coll_groups, doc_users, False)
        }
        one_collection = next((d.collection_id for d in docs if d.pk in allowed), next(iter(collections)))
        one_document = next(iter(allowed), docs[0].pk)
        for narrowing in ({}, {"collection_id": one_collection}, {"document_id": one_document}, {"tags": ["ops"]}):
            scope = search_scope(user=user, **narrowing)
            as_filter, as_union = rows(scope.sql, scope.params), rows(scope.whole_sql, scope.whole_params)
            assert as_filter == as_union, (user.username, narrowing)
            assert len({row[0] for row in as_union}) == len(as_union), "a document twice"
            if not narrowing:
                assert {row[0] for row in as_union} == allowed, user.username
                compared += len(allowed)
    assert compared > 0
