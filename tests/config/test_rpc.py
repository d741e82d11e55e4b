"""The shared RPC base: bodies in, envelopes out, one error shape."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate

from config.errors import InvalidQuery, NotFound, error_body
from config.rpc import RpcApi, envelope, respond
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory


class EchoOutput(serializers.Serializer):
    query = serializers.CharField()


class EchoApi(RpcApi):
    write_scope = False
    input_error = InvalidQuery

    class Input(serializers.Serializer):
        query = serializers.CharField(min_length=3)

    def post(self, request: Request) -> Response:
        return respond(EchoOutput, self.validated(request))


Echo = Callable[[str], Response]
"""The `echo` fixture: posts a raw body to EchoApi as alice."""


@pytest.fixture
def echo(cast: Cast) -> Echo:
    def post(body: str) -> Response:
        request = APIRequestFactory().post("/api/echo.test", body, content_type="application/json")
        force_authenticate(request, user=cast.alice)
        return EchoApi.as_view()(request)

    return post


def test_a_valid_body_comes_back_in_the_data_envelope(echo: Echo) -> None:
    assert echo('{"query": "owls"}').data == {"data": {"query": "owls"}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"query": "ab"}', "query: Ensure this field has at least 3 characters."),
        ("[1, 2]", "The request body must be a JSON object."),
        ("{not json", "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ("[" * 100_000, "The request body is nested too deeply."),
    ],
)
def test_a_bad_body_raises_the_views_own_input_error(echo: Echo, body: str, message: str) -> None:
    response = echo(body)
    assert (response.status_code, response.data) == (400, {"error": "invalid_query", "message": message})


def test_a_page_counts_every_match_not_only_the_page(cast: Cast, api_for: ApiFor) -> None:
    DocumentFactory.create_batch(3, collection=cast.handbook)
    body = api_for(cast.bob).post("documents.list", {"limit": 2, "offset": 1}).json()
    assert (len(body["data"]), body["pagination"]) == (2, {"limit": 2, "offset": 1, "total": 3})


def test_one_output_has_one_envelope_class() -> None:
    assert envelope(EchoOutput) is envelope(EchoOutput, many=False)


def test_an_error_body_is_the_code_the_message_and_any_extra() -> None:
    assert error_body("not_found", "No such thing.", id="x") == {"error": "not_found", "message": "No such thing.", "id": "x"}


def test_an_application_error_carries_its_body() -> None:
    assert NotFound("No such thing.", extra={"id": "x"}).body() == {"error": "not_found", "message": "No such thing.", "id": "x"}
