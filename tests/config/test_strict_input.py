"""Every endpoint refuses a field it does not declare, and the schema says so: nothing sent is dropped unseen."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Collection
from tests.config.test_openapi import openapi
from tests.conftest import ApiFor, Cast

ENDPOINTS = sorted(path.removeprefix("/api/") for path in openapi()["paths"] if path.startswith("/api/"))


def test_the_endpoint_list_is_the_whole_api() -> None:
    assert len(ENDPOINTS) > 25 and {"rag.search", "rag.answer", "documents.import", "collections.create"} <= set(ENDPOINTS)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_unknown_field_is_refused_naming_it(cast: Cast, api_for: ApiFor, endpoint: str) -> None:
    content = openapi()["paths"][f"/api/{endpoint}"]["post"].get("requestBody", {}).get("content", {})
    body_format = "json" if not content or "application/json" in content else "multipart"
    response = api_for(cast.alice).client.post(f"/api/{endpoint}", {"limt": 5}, format=body_format)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"] in {"validation_error", "invalid_query"}
    assert response.json()["message"].startswith("limt: no such field; this endpoint takes ")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_the_schema_allows_no_other_properties_in_a_request_body(endpoint: str) -> None:
    schema = openapi()
    operation = schema["paths"][f"/api/{endpoint}"]["post"]
    for content in operation.get("requestBody", {}).get("content", {}).values():
        name = content["schema"]["$ref"].rsplit("/", 1)[-1]
        assert schema["components"]["schemas"][name]["additionalProperties"] is False


def test_a_misnamed_access_field_creates_no_collection(cast: Cast, api_for: ApiFor) -> None:
    before = Collection.objects.count()
    response = api_for(cast.alice).post("collections.create", {"name": "Private", "permission": "none"})
    assert response.status_code == 400
    assert response.json()["message"].startswith("permission: no such field; this endpoint takes name, ")
    assert Collection.objects.count() == before


def test_a_misspelled_field_is_not_dropped_from_a_search(cast: Cast, api_for: ApiFor) -> None:
    response = api_for(cast.bob).post("rag.search", {"query": "vacation days", "limt": 3})
    assert (response.status_code, response.json()["error"]) == (400, "invalid_query")


def test_an_unknown_field_in_an_upload_form_is_refused(cast: Cast, api_for: ApiFor) -> None:
    upload = SimpleUploadedFile("notes.md", b"# Notes\n", content_type="text/markdown")
    body = {"files": [upload], "collectionId": str(cast.handbook.id), "colection": "x"}
    response = api_for(cast.alice).client.post("/api/documents.import", body, format="multipart")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["message"].startswith("colection: no such field")
