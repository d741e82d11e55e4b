"""A read-scoped token changes nothing: every endpoint that writes refuses it (rag.answer: tests/rag/api/test_read_token.py)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, URLResolver, get_resolver

from config.rpc import RpcApi
from permissions.models import TokenScope
from tests.conftest import ApiFor, Cast

# Every endpoint that changes something, the answer's conversation aside (rag.answer is a read: see below).
WRITES = {
    "apiKeys.create",
    "apiKeys.revoke",
    "collections.add_group",
    "collections.add_user",
    "collections.create",
    "collections.delete",
    "collections.remove_group",
    "collections.remove_user",
    "collections.update",
    "conversations.delete",
    "conversations.update",
    "documents.add_user",
    "documents.archive",
    "documents.create",
    "documents.delete",
    "documents.import",
    "documents.publish",
    "documents.remove_user",
    "documents.unarchive",
    "documents.update",
    "groups.add_user",
    "groups.create",
    "groups.delete",
    "groups.remove_user",
    "groups.update",
    "invites.create",
    "invites.revoke",
    "rag.embed",
    "rag.feedback",
    "sources.create",
    "sources.delete",
    "sources.pause",
    "sources.resume",
    "sources.sync",
    "sources.update",
    "sources.upload",
    "users.activate",
    "users.deactivate",
    "users.update",
}
READS = {
    "apiKeys.list",
    "collections.info",
    "collections.list",
    "conversations.info",
    "conversations.list",
    "documents.info",
    "documents.list",
    "documents.version",
    "documents.versions",
    "graph.entities",
    "graph.entity",
    "graph.passage",
    "groups.info",
    "groups.list",
    "invites.list",
    "jobs.info",
    "jobs.list",
    "rag.answer",
    "rag.search",
    "rag.status",
    "sources.info",
    "sources.kinds",
    "sources.list",
    "sources.syncs",
    "tags.list",
    "users.info",
    "users.list",
}


def api_endpoints() -> dict[str, type[RpcApi]]:
    """Every endpoint under /api/ in the URLconf, with its view class (an RpcApi, each one)."""
    endpoints: dict[str, type[RpcApi]] = {}
    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLResolver) and str(entry.pattern) == "api/":
            for pattern in entry.url_patterns:
                assert isinstance(pattern, URLPattern)
                view = pattern.callback.view_class  # type: ignore[attr-defined]
                assert issubclass(view, RpcApi), pattern
                endpoints[str(pattern.pattern)] = view
    return endpoints


def test_every_endpoint_is_listed_here_as_a_write_or_a_read() -> None:
    """A new endpoint fails this test until it is sorted: a writing one then joins the test below."""
    assert sorted(api_endpoints()) == sorted(WRITES | READS)


def test_every_endpoint_declares_whether_it_needs_the_write_scope() -> None:
    assert {name for name, view in api_endpoints().items() if view.write_scope} == WRITES


def test_an_endpoint_that_does_not_declare_its_scope_cannot_be_routed() -> None:
    class ForgetfulApi(RpcApi):
        pass

    with pytest.raises(ImproperlyConfigured, match="write_scope"):
        ForgetfulApi.as_view()


@pytest.mark.parametrize("endpoint", sorted(WRITES))
def test_a_read_token_is_refused_on_every_endpoint_that_writes(cast: Cast, api_for: ApiFor, endpoint: str) -> None:
    # alice may change everything of her team; the scope is checked before the body is read.
    response = api_for(cast.alice, TokenScope.READ).post(endpoint, {})
    assert response.status_code == 403, response.content
    assert response.json() == {"error": "forbidden", "message": "This endpoint needs an API token with the write scope."}
