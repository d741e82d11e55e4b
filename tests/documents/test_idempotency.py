"""`Idempotency-Key` on documents.create: a client's retry never creates a second document."""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING

import pytest
from django.db import connection
from pytest_django import Settings

from documents.models import Collection, Document
from tests.conftest import Api, ApiFor, Cast

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse


def create(
    api: Api, cast: Cast, key: str | None, title: str = "Release notes", text: str = "# 1.2\n\nFaster."
) -> _MonkeyPatchedResponse:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post("documents.create", {"title": title, "text": text, "collectionId": str(cast.handbook.id)}, **headers)


def test_a_retry_with_the_same_key_returns_the_first_document_and_creates_no_other(cast: Cast, api_for: ApiFor) -> None:
    alice, key = api_for(cast.alice), str(uuid.uuid4())
    first = create(alice, cast, key)
    retry = create(alice, cast, key)
    assert first.status_code == retry.status_code == 200
    assert retry.json() == first.json() and retry["Idempotent-Replayed"] == "true"
    assert Document.objects.filter(title="Release notes").count() == 1


def test_without_a_key_each_request_creates_a_document(cast: Cast, api_for: ApiFor) -> None:
    alice = api_for(cast.alice)
    create(alice, cast, None)
    create(alice, cast, None)
    assert Document.objects.filter(title="Release notes").count() == 2


def test_the_same_key_with_another_body_is_refused_as_reused(cast: Cast, api_for: ApiFor) -> None:
    alice, key = api_for(cast.alice), "retry-0001"
    create(alice, cast, key)
    response = create(alice, cast, key, title="Something else")
    assert response.status_code == 422 and response.json()["error"] == "idempotency_key_reused"
    assert not Document.objects.filter(title="Something else").exists()


def test_keys_belong_to_their_user(cast: Cast, api_for: ApiFor, collection_writable_by_bob: Collection) -> None:
    key = "shared-key-1"
    create(api_for(cast.alice), cast, key)
    response = api_for(cast.bob).post(
        "documents.create",
        {"title": "Release notes", "text": "# 1.2\n\nFaster.", "collectionId": str(collection_writable_by_bob.id)},
        HTTP_IDEMPOTENCY_KEY=key,
    )
    assert response.status_code == 200 and "Idempotent-Replayed" not in response
    assert Document.objects.filter(title="Release notes").count() == 2


def test_a_create_that_failed_does_not_use_its_key_up(cast: Cast, api_for: ApiFor) -> None:
    bob, alice, key = api_for(cast.bob), api_for(cast.alice), "key-after-failure"
    refused = create(bob, cast, key)  # bob may only read the handbook
    assert refused.status_code == 403
    assert create(alice, cast, key).status_code == 200
    assert create(bob, cast, key).status_code == 403, "bob's key is still his own and still unused"


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "é-accent"])
def test_a_malformed_key_is_refused(cast: Cast, api_for: ApiFor, key: str) -> None:
    response = create(api_for(cast.alice), cast, key)
    assert response.status_code == 400 and response.json()["error"] == "validation_error"
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_create_one_document(cast: Cast, api_for: ApiFor) -> None:
    alice, key = api_for(cast.alice), str(uuid.uuid4())
    responses = []

    def send() -> None:
        try:
            responses.append(create(alice, cast, key))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in responses] == [200] * 6
    assert len({r.json()["data"]["id"] for r in responses}) == 1
    assert Document.objects.filter(title="Release notes").count() == 1


def test_a_key_older_than_its_time_to_live_is_forgotten(cast: Cast, api_for: ApiFor, settings: Settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from documents.models import IdempotentRequest

    alice, key = api_for(cast.alice), "old-key-0001"
    create(alice, cast, key)
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_TTL + 1))
    response = create(alice, cast, key, title="A new write")
    assert response.status_code == 200 and "Idempotent-Replayed" not in response
    assert IdempotentRequest.objects.count() == 1
