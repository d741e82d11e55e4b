"""Errors on pages show the product's layout, not Django's bare text; the API keeps its JSON."""

from __future__ import annotations

import uuid

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path
from pytest_django import Settings

from config.urls import handler500, urlpatterns
from tests.conftest import Cast, SignIn


def broken_page(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in a page")


urlpatterns = [*urlpatterns, path("broken", broken_page)]
__all__ = ["handler500", "urlpatterns"]  # this module is the URL map of the server-error test


def test_a_document_you_may_not_read_shows_the_products_not_found_page(signed_in: SignIn, cast: Cast) -> None:
    response = signed_in(cast.bob).get(f"/doc/{uuid.uuid4()}")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Page not found</h1>" in page and "it is not one you may read" in page
    assert 'href="/rag">Ask</a>' in page, "the page keeps the header's links"
    nonce = page.split('<style nonce="', 1)[1].split('"', 1)[0]
    assert nonce and f"style-src 'nonce-{nonce}'" in response["Content-Security-Policy"]


def test_an_unknown_page_shows_the_not_found_page_signed_out_too(client: Client, db: None) -> None:
    response = client.get("/no-such-page")
    assert response.status_code == 404 and "<h1>Page not found</h1>" in response.content.decode()


def test_an_unknown_api_route_still_answers_json(client: Client, db: None) -> None:
    response = client.get("/api/no.such")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


@pytest.mark.urls(__name__)
def test_a_server_error_shows_the_styled_page_with_its_style_allowed_by_the_csp(
    signed_in: SignIn, cast: Cast, settings: Settings
) -> None:
    client = signed_in(cast.bob)
    client.raise_request_exception = False
    response = client.get("/broken")
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Something went wrong</h1>" in page and "a bug in a page" not in page
    nonce = page.split('<style nonce="', 1)[1].split('"', 1)[0]
    assert nonce and f"style-src 'nonce-{nonce}'" in response["Content-Security-Policy"]
