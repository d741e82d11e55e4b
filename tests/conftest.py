from __future__ import annotations

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from documents.models import Collection
from permissions.models import Access, Role, TokenScope, User
from permissions.services import api_token_create
from tests.factories import (
    CollectionFactory,
    CollectionMembershipFactory,
    TeamFactory,
    UserFactory,
)


@dataclass
class Cast:
    """alice owns, bob reads, charlie is from another team."""

    alice: User
    bob: User
    charlie: User
    handbook: Collection  # team-readable
    private: Collection  # no team access; alice is a read-write member


@pytest.fixture
def cast(db) -> Cast:
    acme, other = TeamFactory(name="Acme"), TeamFactory(name="Other")
    alice = UserFactory.create(team=acme, username="alice", is_team_admin=True)
    bob = UserFactory.create(team=acme, username="bob")
    charlie = UserFactory.create(team=other, username="charlie", is_team_admin=True)
    handbook = CollectionFactory.create(team=acme, name="Handbook", default_access=Access.READ)
    CollectionMembershipFactory(collection=handbook, user=alice, role=Role.READ_WRITE)
    private = CollectionFactory.create(team=acme, name="Private", default_access=Access.NONE)
    CollectionMembershipFactory(collection=private, user=alice, role=Role.READ_WRITE)
    return Cast(alice=alice, bob=bob, charlie=charlie, handbook=handbook, private=private)


class Api:
    """A client that speaks the RPC API with a bearer token."""

    def __init__(self, token: str | None) -> None:
        self.client = APIClient()
        if token:
            self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(self, endpoint: str, body=None, **kwargs):
        return self.client.post(f"/api/{endpoint}", body if body is not None else {}, format="json", **kwargs)


@pytest.fixture
def api_for():
    def make(user: User | None, scope: str = TokenScope.WRITE) -> Api:
        return Api(api_token_create(user=user, scope=scope).plaintext if user else None)

    return make


@pytest.fixture(autouse=True)
def fake_providers(settings):
    """Every test runs on the deterministic fake embedding provider unless it says otherwise."""
    from django.core.cache import cache

    from rag.providers.embeddings import reset_provider_cache

    settings.RAG_EMBEDDING_PROVIDER = "fake"
    settings.RAG_EMBEDDING_MODEL = "fake-embedding"
    settings.RAG_EMBEDDING_DIMENSION = 384
    reset_provider_cache()
    cache.clear()
    yield
    reset_provider_cache()


@pytest.fixture
def signed_in(client):
    def sign_in(user):
        user.save(update_fields=["password"])  # the factory sets the password without saving it
        client.force_login(user)
        return client

    return sign_in
