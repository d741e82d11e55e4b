"""An operator made with createsuperuser belongs to no team: every page and endpoint answers, showing nothing."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from permissions.models import User
from tests.conftest import Cast
from tests.factories import UserFactory


@pytest.fixture
def operator(cast: Cast) -> User:
    operator = UserFactory.create(team=None, username="root", is_staff=True, is_superuser=True)
    operator.save(update_fields=["password"])
    return operator


def test_the_rag_page_tells_an_operator_without_a_team_how_to_get_one(operator: User, client: Client) -> None:
    client.force_login(operator)
    page = client.get("/rag").content.decode()
    assert "You belong to no team yet" in page and "create_team" in page


@pytest.mark.parametrize("path", ["/graph", "/import"])
def test_the_other_pages_open_for_an_operator_without_a_team(operator: User, client: Client, path: str) -> None:
    client.force_login(operator)
    assert client.get(path).status_code == 200


@pytest.mark.parametrize(
    ("endpoint", "body", "status"),
    [
        ("graph.entities", {"query": "deploy"}, 200),
        ("graph.entity", {"id": str(uuid.uuid4())}, 404),
        ("graph.passage", {"chunkId": f"{uuid.uuid4()}:1:0"}, 404),
    ],
)
def test_the_graph_shows_an_operator_without_a_team_nothing(
    operator: User, client: Client, endpoint: str, body: dict, status: int
) -> None:
    client.force_login(operator)
    response = client.post(f"/api/{endpoint}", body, content_type="application/json")
    assert response.status_code == status
    assert response.json().get("data", []) == [] or response.json()["error"] == "not_found"
