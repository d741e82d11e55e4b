"""The answer cache over real HTTP: gunicorn with two worker processes sharing a real Redis, as `make run` serves it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
from pytest_django import DjangoDbBlocker

from permissions.models import TokenScope
from permissions.services import api_token_create
from rag.indexing.pipeline import index_documents
from tests.conftest import Cast
from tests.factories import DocumentFactory
from tests.rag.texts import OWLS, SECRET
from tests.servers import GunicornServer

if TYPE_CHECKING:
    # Imported for annotations only: a module-level TestBroker is a class pytest tries to collect.
    from tests.conftest import TestBroker

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

SECRET_QUESTION = "What is the barn code?"


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, tmp_path_factory: pytest.TempPathFactory, test_broker: TestBroker
) -> Iterator[GunicornServer]:
    from django.conf import settings

    server = GunicornServer(
        log_path=tmp_path_factory.mktemp("answer-cache") / "gunicorn.log",
        workers=2,
        extra_env={
            # Production's settings module, whose cache is Redis when REDIS_URL is set (the test settings' is in-process).
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "SECRET_KEY": settings.SECRET_KEY,
            "REDIS_URL": test_broker.redis_url,
            "CELERY_BROKER_URL": "",
            "RAG_LLM_PROVIDER": "fake",
            "RAG_LLM_MODEL": "fake-llm",
            "API_THROTTLE_RAG": "100000/min",
            "API_THROTTLE_USER": "100000/min",
        },
    ).start()
    yield server
    server.stop()


def post(server: GunicornServer, token: str, endpoint: str, body: dict) -> httpx.Response:
    # A new connection each time, so requests spread over both worker processes.
    return httpx.post(f"{server.url}/api/{endpoint}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_a_revoked_membership_is_honoured_on_the_very_next_request_over_http(cast: Cast, server: GunicornServer) -> None:
    docs = [
        DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        DocumentFactory.create(collection=cast.private, created_by=cast.alice, title="Secret owls", text=SECRET),
    ]
    index_documents(document_ids=[d.pk for d in docs])
    alice = api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext
    bob = api_token_create(user=cast.bob).plaintext
    added = post(server, alice, "collections.add_user", {"id": str(cast.private.pk), "userId": str(cast.bob.pk)})
    assert added.status_code == 200, added.text

    answers = [post(server, bob, "rag.answer", {"query": SECRET_QUESTION}).json()["data"] for _ in range(6)]
    assert [a["cached"] for a in answers] == [False] + [True] * 5
    assert all("4711" in a["answer"] for a in answers) and len({a["id"] for a in answers}) == 6
    with httpx.stream(
        "POST",
        f"{server.url}/api/rag.answer",
        json={"query": SECRET_QUESTION, "stream": True},
        headers={"Authorization": f"Bearer {bob}"},
        timeout=30,
    ) as response:
        stream = response.read().decode()
    assert '"cached":true' in stream and "4711" in stream

    removed = post(server, alice, "collections.remove_user", {"id": str(cast.private.pk), "userId": str(cast.bob.pk)})
    assert removed.status_code == 200, removed.text
    response = post(server, bob, "rag.answer", {"query": SECRET_QUESTION})
    data = response.json()["data"]
    assert data["cached"] is False and data["mode"] == "insufficient"
    assert "4711" not in response.text and str(docs[1].pk) not in response.text and "Secret owls" not in response.text
    # The owls bob may still read are answered, then cached again, under the team's new cache token.
    first, again = (post(server, bob, "rag.answer", {"query": "What do owls hunt at night?"}).json()["data"] for _ in range(2))
    assert (first["cached"], again["cached"]) == (False, True)
    assert {c["document"]["title"] for c in again["citations"]} == {"Owls"} and "4711" not in json.dumps(again)
