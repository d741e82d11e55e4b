"""The OpenAPI schema describes what the API really returns: real responses validate against it.

To cover more endpoints, add `Case`s to CASES (and the resource to COVERED_RESOURCES): a body
built from the `World`, who calls, and the status expected; the test validates the response
against the schema that the endpoint declares for that status.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from jsonschema import Draft202012Validator, FormatChecker
from pytest_django import Settings

from connectors.models import SourceSync, SyncedSource
from connectors.services import source_create
from documents.ingestion.jobs import IncomingFile, import_job_create, import_job_run
from documents.models import Document, ImportJob
from permissions.members.services import invite_create
from permissions.models import ApiToken, Invite, TokenScope, User
from permissions.services import api_token_create, api_token_revoke
from rag.answering.answer import answer_complete, answer_events
from rag.answering.passages import retrieve
from rag.indexing.pipeline import index_documents
from rag.models import Conversation, Mention, QueryLog
from tests.conftest import ApiFor, Cast
from tests.documents.ingestion.files import make_pdf
from tests.factories import DocumentFactory, GroupFactory, GroupMembershipFactory

COVERED_RESOURCES = {
    "documents",
    "collections",
    "apiKeys",
    "rag",
    "graph",
    "jobs",
    "tags",
    "conversations",
    "groups",
    "users",
    "invites",
    "sources",
}
ERROR_REF = {"$ref": "#/components/schemas/Error"}

# jsonschema checks `uuid` itself; its `date-time` check needs rfc3339-validator, which is not installed.
FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def is_datetime(value: object) -> bool:
    return not isinstance(value, str) or isinstance(datetime.fromisoformat(value), datetime)


@cache
def openapi() -> dict:
    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


def json_schema(schema: dict) -> dict:
    """An OpenAPI 3.0 schema as JSON Schema: `nullable` becomes a null alternative, and an object
    with declared properties allows no others, so an undeclared field in a response fails."""
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            converted[key] = {name: json_schema(field) for name, field in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            converted[key] = json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            converted[key] = [json_schema(option) for option in value]
        elif key != "nullable":
            converted[key] = value
    if converted.get("type") == "object" and "properties" in converted:
        converted.setdefault("additionalProperties", False)
    return {"anyOf": [converted, {"type": "null"}]} if schema.get("nullable") else converted


def operation(endpoint: str) -> dict:
    return openapi()["paths"][f"/api/{endpoint}"]["post"]


def response_validator(endpoint: str, status: int) -> Draft202012Validator:
    """Validates a body against what `endpoint` declares for `status`, `$ref`s resolved in components."""
    responses = operation(endpoint)["responses"]
    assert str(status) in responses, f"{endpoint} does not declare a {status} response"
    components = {name: json_schema(schema) for name, schema in openapi()["components"]["schemas"].items()}
    schema = {
        **json_schema(responses[str(status)]["content"]["application/json"]["schema"]),
        "components": {"schemas": components},
    }
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FORMATS)


@dataclass
class World:
    """The cast, alice's published (and indexed) handbook document, one whose author is gone, alice's spare
    and revoked tokens, an answer alice was given, an import of alice's with the document it made, and a
    conversation of alice's."""

    cast: Cast
    doc: Document
    orphan: Document
    token: ApiToken
    revoked: ApiToken
    answer: QueryLog
    job: ImportJob
    imported: Document
    conversation: Conversation
    source: SyncedSource


def synced_source(cast: Cast) -> SyncedSource:
    """An Obsidian ZIP source of alice's, whose last sync failed on one item."""
    source = source_create(by=cast.alice, name="Vault", kind="zip", config={"flavour": "obsidian"}, collection=cast.handbook)
    sync = SourceSync.objects.create(
        source=source, stage="done", seen=2, created=1, failed=1, errors=[{"key": "a.png", "message": "Binary."}]
    )
    SyncedSource.objects.filter(pk=source.pk).update(last_sync=sync)
    return source


def a_zip(w: World) -> dict[str, Any]:
    return {"id": str(w.source.id), "file": SimpleUploadedFile("vault.zip", b"PK\x05\x06" + b"\x00" * 18)}


@pytest.fixture
def world(cast: Cast, settings: Settings, tmp_path: Path) -> World:
    settings.STORAGES = {**settings.STORAGES, "imports": {**settings.STORAGES["imports"], "OPTIONS": {"location": str(tmp_path)}}}
    doc = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, text="# Owls\n\nOwls hunt mice at night.", tags=["owls", "night"]
    )
    index_documents(document_ids=[doc.pk])
    job = import_job_create(by=cast.alice, collection=cast.handbook, origin="owls.pdf", publish=True)
    import_job_run(job=job, files=[IncomingFile(path="owls.pdf", read=lambda: make_pdf([["Barn owls"], ["Snowy owls"]]))])
    answer_complete(answer_events(user=cast.alice, retrieval=retrieve(user=cast.alice, query="What do owls hunt at night?")))
    return World(
        job=job,
        imported=Document.objects.get(title="Barn owls"),
        cast=cast,
        doc=doc,
        orphan=DocumentFactory.create(collection=cast.handbook, created_by=None),
        token=api_token_create(user=cast.alice, name="spare").token,
        revoked=api_token_revoke(token=api_token_create(user=cast.alice, expires_at=timezone.now() + timedelta(days=1)).token),
        answer=QueryLog.objects.create(user=cast.alice, team_id=cast.alice.team_id, query="What do owls hunt?"),
        conversation=Conversation.objects.get(user=cast.alice),
        source=synced_source(cast),
    )


def no_body(world: World) -> dict:
    return {}


@dataclass(frozen=True)
class Case:
    endpoint: str
    body: Callable[[World], Any] = no_body
    status: int = 200
    caller: str | None = "alice"  # a member of the cast, or None for no token
    scope: str = TokenScope.WRITE
    note: str = ""
    multipart: bool = False

    def __str__(self) -> str:
        return "-".join(filter(None, [self.endpoint, str(self.status), self.note]))


def doc_id(world: World) -> dict:
    return {"id": str(world.doc.id)}


def doc_and_bob(world: World) -> dict:
    return {"id": str(world.doc.id), "userId": str(world.cast.bob.id)}


def handbook_and_bob(world: World) -> dict:
    return {"id": str(world.cast.handbook.id), "userId": str(world.cast.bob.id)}


def ops_group(world: World) -> dict:
    """A group of alice's team with bob in it, made for the case."""
    group = GroupFactory.create(team=world.cast.alice.team, name="Ops")
    GroupMembershipFactory.create(group=group, user=world.cast.bob)
    return {"id": str(group.id)}


def handbook_and_ops(world: World) -> dict:
    return {"id": str(world.cast.handbook.id), "groupId": ops_group(world)["id"]}


def subject_entity(world: World) -> uuid.UUID:
    """The entity named by the world's document title (its chunks are its subject mentions)."""
    return Mention.objects.filter(document_id=world.doc.pk, subject=True).values_list("entity_id", flat=True)[0]


def new_document(world: World) -> dict:
    return {"title": "Onboarding", "text": "# Welcome", "collectionId": str(world.cast.handbook.id)}


def upload(world: World) -> dict:
    return {"collectionId": str(world.cast.handbook.id), "files": [SimpleUploadedFile("notes.md", b"# Notes")]}


def invite_of(admin: User) -> Invite:
    assert admin.team is not None
    return invite_create(team=admin.team, by=admin).invite


CASES = [
    Case("documents.create", new_document, note="draft"),
    Case("documents.create", lambda w: {**new_document(w), "text": "", "publish": True}, note="published-blank"),
    Case("documents.info", doc_id),
    Case("documents.info", lambda w: {"id": str(w.orphan.id)}, note="author-gone"),
    Case("documents.info", lambda w: {"id": str(w.imported.id)}, note="imported"),
    Case("documents.import", upload, multipart=True),
    Case("sources.kinds"),
    Case("sources.list"),
    Case("sources.info", lambda w: {"id": str(w.source.id)}),
    Case("sources.info", lambda w: {"id": str(w.source.id)}, status=404, caller="charlie"),
    Case("sources.syncs", lambda w: {"id": str(w.source.id)}),
    Case(
        "sources.create",
        lambda w: {"name": "Notion", "kind": "zip", "collectionId": str(w.cast.handbook.id), "config": {"flavour": "notion"}},
    ),
    Case(
        "sources.create",
        lambda w: {"name": "Bad", "kind": "zip", "collectionId": str(w.cast.handbook.id), "config": {"flavour": "wiki"}},
        status=400,
        note="flavour",
    ),
    Case("sources.update", lambda w: {"id": str(w.source.id), "intervalMinutes": 0, "secrets": {"token": "t"}}),
    Case("sources.sync", lambda w: {"id": str(w.source.id)}),
    Case("sources.sync", lambda w: {"id": str(w.source.id)}, status=403, scope=TokenScope.READ, note="read-scope"),
    Case("sources.pause", lambda w: {"id": str(w.source.id)}),
    Case("sources.resume", lambda w: {"id": str(w.source.id)}),
    Case("sources.upload", a_zip, multipart=True),
    Case("sources.delete", lambda w: {"id": str(w.source.id)}),
    Case("jobs.info", lambda w: {"id": str(w.job.id)}),
    Case("jobs.list"),
    Case("documents.list", lambda w: {"limit": 1}),
    Case("documents.list", lambda w: {"tags": ["owls"]}, note="tags"),
    Case("documents.create", lambda w: {**new_document(w), "tags": ["Onboarding", "hr"]}, note="tags"),
    Case("tags.list"),
    Case("tags.list", lambda w: {"collectionId": str(w.cast.handbook.id)}, status=404, caller="charlie"),
    Case("tags.list", lambda w: {"limit": 0}, status=400, note="limit"),
    Case("documents.update", lambda w: {"id": str(w.doc.id), "text": "Changed."}),
    Case("documents.delete", doc_id),
    Case("documents.archive", doc_id),
    Case("documents.unarchive", doc_id),
    Case("documents.publish", doc_id),
    Case("documents.versions", doc_id),
    Case("documents.version", lambda w: {"id": str(w.doc.id), "version": 1}),
    Case("documents.version", lambda w: {"id": str(w.doc.id), "version": 1}, status=404, caller="charlie"),
    Case("documents.add_user", doc_and_bob),
    Case("documents.remove_user", doc_and_bob),
    Case("collections.create", lambda w: {"name": "Engineering"}),
    Case("collections.list", lambda w: {"offset": 1}),
    Case("collections.add_user", lambda w: {**handbook_and_bob(w), "role": "read_write"}),
    Case("collections.remove_user", handbook_and_bob),
    Case("collections.info", lambda w: {"id": str(w.cast.private.id)}),
    Case("collections.update", lambda w: {"id": str(w.cast.handbook.id), "name": "Staff handbook", "defaultAccess": "none"}),
    Case("collections.delete", lambda w: {"id": str(w.cast.handbook.id), "confirm": True}),
    Case("collections.delete", lambda w: {"id": str(w.cast.handbook.id)}, status=409, note="not-empty"),
    Case("collections.delete", lambda w: {"id": str(w.cast.handbook.id)}, status=403, caller="bob", note="not-admin"),
    Case("collections.info", lambda w: {"id": str(w.cast.private.id)}, status=404, caller="charlie"),
    Case("collections.add_group", lambda w: {**handbook_and_ops(w), "role": "read_write"}),
    Case("collections.remove_group", handbook_and_ops),
    Case("groups.list"),
    Case("groups.info", ops_group),
    Case("groups.create", lambda w: {"name": "Support"}),
    Case("groups.update", lambda w: {**ops_group(w), "name": "Operations"}),
    Case("groups.delete", ops_group),
    Case("groups.add_user", lambda w: {**ops_group(w), "userId": str(w.cast.alice.id)}),
    Case("groups.remove_user", lambda w: {**ops_group(w), "userId": str(w.cast.bob.id)}),
    Case("groups.create", lambda w: {"name": "Mine"}, status=403, caller="bob", note="not-admin"),
    Case("groups.info", ops_group, status=404, caller="charlie"),
    Case("apiKeys.create", lambda w: {"scope": "read"}),
    Case(
        "apiKeys.create",
        lambda w: {"name": "ci", "expiresAt": (timezone.now() + timedelta(days=30)).isoformat()},
        note="expiring",
    ),
    Case("apiKeys.list"),
    Case("apiKeys.revoke", lambda w: {"id": str(w.token.id)}),
    Case("rag.search", lambda w: {"query": "owls hunt mice", "threshold": 0}),
    Case("rag.search", lambda w: {"query": "owls hunt mice", "threshold": 0, "explain": True}, note="explain"),
    Case("rag.search", lambda w: {"query": "owls hunt mice", "mode": "keyword", "explain": True}, note="explain-keyword"),
    Case("rag.search", lambda w: {"query": "owls hunt mice", "tags": ["owls"]}, note="tags"),
    Case("rag.search", lambda w: {"query": "owls hunt mice", "includeContext": False, "mode": "keyword"}, note="no-context"),
    Case("rag.answer", lambda w: {"query": "What do owls hunt at night?"}),
    Case("rag.answer", lambda w: {"query": "What do owls hunt at night?", "tags": ["owls"]}, note="tags"),
    Case("rag.answer", lambda w: {"query": "What do owls hunt at night?", "fresh": True}, note="fresh"),
    Case(
        "rag.answer", lambda w: {"query": "And where do they sleep?", "conversationId": str(w.conversation.id)}, note="follow-up"
    ),
    Case("rag.feedback", lambda w: {"answerId": str(w.answer.id), "rating": 4, "comment": "Helpful"}),
    Case("conversations.list", lambda w: {"limit": 5}),
    Case("conversations.info", lambda w: {"id": str(w.conversation.id)}),
    Case("conversations.update", lambda w: {"id": str(w.conversation.id), "title": "Owls at night"}),
    Case("conversations.update", lambda w: {"id": str(w.conversation.id), "title": "Mine"}, status=404, caller="charlie"),
    Case("conversations.delete", lambda w: {"id": str(w.conversation.id)}),
    Case("conversations.info", lambda w: {"id": str(w.conversation.id)}, status=404, caller="bob", note="not-yours"),
    Case("conversations.delete", lambda w: {"id": str(w.conversation.id)}, status=404, caller="charlie"),
    Case("conversations.info", lambda w: {"id": "not-a-uuid"}, status=400, note="id"),
    Case("rag.answer", lambda w: {"query": "owls", "conversationId": str(w.conversation.id)}, status=404, caller="bob"),
    Case("rag.status"),
    Case("rag.embed", lambda w: {"documentId": str(w.doc.id)}),
    Case("graph.entities", lambda w: {"query": ""}),
    Case("graph.entity", lambda w: {"id": str(subject_entity(w))}),
    Case("graph.passage", lambda w: {"chunkId": f"{w.doc.pk}:{w.doc.version}:0"}),
    Case("documents.create", status=400, note="missing-fields"),
    Case("graph.entities", lambda w: {"limit": 0}, status=400, note="limit"),
    Case("graph.entity", lambda w: {"id": str(subject_entity(w))}, status=404, caller="charlie"),
    Case("graph.passage", lambda w: {"chunkId": f"{w.doc.pk}:{w.doc.version}:0"}, status=404, caller="charlie"),
    Case("graph.passage", lambda w: {"chunkId": str(w.doc.pk)}, status=400, note="chunk-id"),
    Case("rag.search", lambda w: {"query": "x"}, status=400, note="short-query"),
    Case("rag.answer", lambda w: {"query": "owls", "limit": 0}, status=400, note="limit"),
    Case("rag.search", lambda w: {"query": "owls hunt"}, status=401, caller=None),
    Case("rag.embed", lambda w: {"documentId": str(w.doc.id)}, status=403, scope=TokenScope.READ, note="read-token"),
    Case("rag.embed", lambda w: {"documentId": str(w.doc.id)}, status=404, caller="charlie"),
    Case("rag.feedback", lambda w: {"answerId": str(w.answer.id), "rating": 4}, status=404, caller="bob", note="not-yours"),
    Case("documents.list", lambda w: {"limit": 0}, status=400, note="limit"),
    Case("collections.list", lambda w: [1, 2], status=400, note="not-an-object"),
    Case("apiKeys.create", lambda w: {"scope": "admin"}, status=400, note="scope"),
    Case("documents.info", doc_id, status=401, caller=None),
    Case("apiKeys.list", status=401, caller=None),
    Case("documents.update", lambda w: {"id": str(w.doc.id), "text": "x"}, status=403, caller="bob", note="reader"),
    Case("documents.archive", doc_id, status=403, scope=TokenScope.READ, note="read-token"),
    Case("collections.create", lambda w: {"name": "Mine"}, status=403, caller="bob", note="not-admin"),
    Case("documents.info", doc_id, status=404, caller="charlie"),
    Case("collections.add_user", handbook_and_bob, status=404, caller="charlie"),
    Case("apiKeys.revoke", lambda w: {"id": str(uuid.uuid4())}, status=404),
    Case("documents.import", upload, status=403, caller="bob", multipart=True, note="reader"),
    Case("documents.import", lambda w: {"collectionId": str(w.cast.handbook.id)}, status=400, multipart=True, note="no-files"),
    Case("jobs.info", lambda w: {"id": str(w.job.id)}, status=404, caller="charlie"),
    Case("jobs.list", status=401, caller=None),
    Case("users.list", caller="bob"),
    Case("users.info", lambda w: {"id": str(w.cast.bob.id)}),
    Case("users.info", lambda w: {"id": str(w.cast.bob.id)}, status=404, caller="charlie"),
    Case("users.update", lambda w: {"id": str(w.cast.bob.id), "role": "read_only"}),
    Case("users.update", lambda w: {"id": str(w.cast.alice.id), "role": "member"}, status=403, caller="bob", note="not-admin"),
    Case("users.deactivate", lambda w: {"id": str(w.cast.bob.id)}),
    Case("users.activate", lambda w: {"id": str(w.cast.bob.id)}),
    Case("invites.create", lambda w: {"email": "dora@example.com", "role": "read_only"}),
    Case("invites.list", lambda w: {"status": "pending"}),
    Case("invites.revoke", lambda w: {"id": str(invite_of(w.cast.alice).id)}),
    Case("invites.revoke", lambda w: {"id": str(invite_of(w.cast.alice).id)}, status=404, caller="charlie"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_response_is_what_the_schema_declares(world: World, api_for: ApiFor, case: Case) -> None:
    caller = getattr(world.cast, case.caller) if case.caller else None
    api = api_for(caller, case.scope)
    if case.multipart:
        response = api.client.post(f"/api/{case.endpoint}", case.body(world), format="multipart")
    else:
        response = api.post(case.endpoint, case.body(world))
    assert response.status_code == case.status, response.content
    response_validator(case.endpoint, case.status).validate(response.json())


def covered_endpoints() -> list[str]:
    return sorted(
        path.removeprefix("/api/")
        for path in openapi()["paths"]
        if path.startswith("/api/") and path.removeprefix("/api/").split(".")[0] in COVERED_RESOURCES
    )


def test_every_covered_endpoint_has_a_success_case() -> None:
    succeeding = {case.endpoint for case in CASES if case.status == 200}
    assert [endpoint for endpoint in covered_endpoints() if endpoint not in succeeding] == []


@pytest.mark.parametrize("status", [400, 401, 403])
def test_every_covered_endpoint_declares_the_shared_error_body(status: int) -> None:
    bodies = {
        endpoint: operation(endpoint)["responses"][str(status)]["content"]["application/json"]["schema"]
        for endpoint in covered_endpoints()
    }
    assert {endpoint: body for endpoint, body in bodies.items() if body != ERROR_REF} == {}


def test_an_undeclared_field_fails_the_validation() -> None:
    body = {
        "data": {
            "id": str(uuid.uuid4()),
            "name": "x",
            "description": "",
            "defaultAccess": "read",
            "createdAt": "2025-01-01T00:00:00Z",
        }
    }
    validator = response_validator("collections.create", 200)
    assert validator.is_valid(body) and not validator.is_valid({"data": {**body["data"], "secret": "leak"}})
