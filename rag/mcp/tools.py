"""The tools /mcp offers agents, each one of the API's endpoints under another name.

A tool takes its endpoint's body as arguments, validated by that endpoint's own input serializer
(the same rules and messages), makes the same selector or service call as the endpoint, as the
token's user, and answers with the endpoint's output serializer: a tool's result is the endpoint's
response body. Failures are the API's `ApplicationError`s, which the server turns into tool errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from rest_framework import serializers
from rest_framework.fields import empty

from config.errors import ApplicationError, Forbidden, InvalidQuery, RagDisabled, ValidationFailed
from config.exceptions import first_message
from config.rpc import (
    IdInput,
    PaginationInput,
    SerializerClass,
    check_json_types,
    check_known_fields,
    envelope,
    page_body,
    paginated_envelope,
)
from connectors.apis import SyncedSourceOutput, SyncOutput
from connectors.selectors import source_get, source_list, source_with_progress
from connectors.services import source_sync_request
from documents.apis import CollectionOutput, DocumentInfoOutput
from documents.selectors import collection_list, document_get, source_of
from permissions.models import User
from rag.answering.answer import answer_complete, answer_request
from rag.api.answer import AnswerOutput, RagAnswerApi, answer_arguments
from rag.api.base import QueryField, StrictInt
from rag.api.graph import EntityDetailOutput, GraphEntitiesApi, GraphEntitiesResponse, GraphEntityApi
from rag.api.search import RagSearchApi, search_arguments, search_response_body
from rag.retrieval.explore import entity_get, entity_list
from rag.retrieval.search import search_request

# read_document returns at most this many characters at a time (an agent pages through longer texts).
READ_MAX_CHARS = 50_000


@dataclass(frozen=True)
class Caller:
    """Who calls a tool: the API token's user, and whether the token may write (has the write scope)."""

    user: User
    can_write: bool


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input: SerializerClass
    arguments: Mapping[str, str]  # each argument's description, for the agent
    run: Callable[[Caller, dict[str, Any]], dict[str, Any]]
    input_error: type[ApplicationError] = InvalidQuery
    rag: bool = True  # off with RAG_ENABLED=false, as the rag.* and graph.* endpoints are

    def input_schema(self) -> dict[str, Any]:
        """The arguments as JSON Schema, read from the input serializer so the schema and the validation agree."""
        fields = self.input().fields
        return {
            "type": "object",
            "properties": {name: {**_field_schema(field), "description": self.arguments[name]} for name, field in fields.items()},
            "required": [name for name, field in fields.items() if field.required],
            "additionalProperties": False,
        }

    def validated(self, arguments: dict[str, Any]) -> dict[str, Any]:
        serializer = self.input(data=arguments)
        try:
            check_known_fields(serializer, arguments, taker=self.name, noun="argument")
            check_json_types(serializer, arguments)
            serializer.is_valid(raise_exception=True)
        except serializers.ValidationError as exc:
            raise self.input_error(first_message(exc.detail)) from exc
        return serializer.validated_data


def _field_schema(field: serializers.Field) -> dict[str, Any]:
    schema: dict[str, Any]
    if isinstance(field, serializers.ChoiceField):
        schema = {"type": "string", "enum": list(field.choices)}
    elif isinstance(field, serializers.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(field, (serializers.IntegerField, serializers.FloatField)):
        schema = {"type": "integer" if isinstance(field, serializers.IntegerField) else "number"}
        schema.update(
            {key: value for key, value in (("minimum", field.min_value), ("maximum", field.max_value)) if value is not None}
        )
    elif isinstance(field, serializers.UUIDField):
        schema = {"type": "string", "format": "uuid"}
    elif isinstance(field, QueryField):
        schema = {"type": "string", "minLength": QueryField.MIN_LENGTH, "maxLength": settings.RAG_MAX_QUERY_LENGTH}
    elif isinstance(field, serializers.CharField):
        schema = {"type": "string"}
        schema.update({key: value for key, value in (("minLength", field.min_length), ("maxLength", field.max_length)) if value})
    elif isinstance(field, serializers.ListField):
        schema = {"type": "array", "items": _field_schema(field.child)}
        schema.update({key: value for key, value in (("minItems", field.min_length), ("maxItems", field.max_length)) if value})
    else:
        raise TypeError(f"No JSON Schema for {type(field).__name__}")
    if field.default is not empty and not callable(field.default):
        schema["default"] = field.default
    return schema


def call(name: str, *, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run tool `name` for `caller`; raises `ApplicationError` as its endpoint would."""
    tool = TOOLS.get(name)
    if tool is None:
        raise InvalidQuery(f"No tool named {name!r}; the tools are {', '.join(TOOLS)}.")
    if tool.rag and not settings.RAG_ENABLED:
        raise RagDisabled("RAG is disabled on this server (RAG_ENABLED=false).")
    return tool.run(caller, tool.validated(arguments))


def _search(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    return search_response_body(search_request(user=caller.user, **search_arguments(data)))


class AnswerInput(RagAnswerApi.Input):
    # A tool's result is one message: the answer comes whole; regenerating is the /rag page's.
    # (DRF drops a field set to None in a subclass.)
    stream = None  # type: ignore[assignment]
    fresh = None  # type: ignore[assignment]
    replaces = None  # type: ignore[assignment]


def _answer(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    events = answer_request(user=caller.user, keep=caller.can_write, **answer_arguments(data))
    return envelope(AnswerOutput)({"data": answer_complete(events).body()}).data


class ReadDocumentInput(IdInput):
    offset = StrictInt(min_value=0, default=0)
    maxChars = StrictInt(min_value=1, max_value=READ_MAX_CHARS, default=READ_MAX_CHARS)


def _read_document(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    document = document_get(user=caller.user, document_id=data["id"])
    document.source = source_of(document=document)  # type: ignore[attr-defined]  # as documents.info shows it
    body = envelope(DocumentInfoOutput)({"data": document}).data
    text, offset = body["data"]["text"], data["offset"]
    body["data"].update(text=text[offset : offset + data["maxChars"]], textOffset=offset, textLength=len(text))
    return body


def _list_collections(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    return page_body(CollectionOutput, collection_list(user=caller.user), limit=data["limit"], offset=data["offset"])


def _find_entities(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    entities, total = entity_list(user=caller.user, query=data["query"], limit=data["limit"], offset=data["offset"])
    body = {"data": entities, "pagination": {"limit": data["limit"], "offset": data["offset"], "total": total}}
    # cast: the stubs read `.data` as the declared field named data, not the rendered body.
    return cast(dict[str, Any], GraphEntitiesResponse(body).data)


def _get_entity(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    return envelope(EntityDetailOutput)({"data": entity_get(user=caller.user, entity_id=data["id"], limit=data["limit"])}).data


def _list_sources(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    sources = list(source_list(user=caller.user)[data["offset"] : data["offset"] + data["limit"]])
    body = {
        "data": [source_with_progress(source) for source in sources],
        "pagination": {"limit": data["limit"], "offset": data["offset"], "total": source_list(user=caller.user).count()},
    }
    return cast(dict[str, Any], paginated_envelope(SyncedSourceOutput)(body).data)


def _sync_source(caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    source = source_get(user=caller.user, source_id=data["id"])
    if not caller.can_write:
        raise Forbidden("Syncing a source needs a write-scoped token.")
    return envelope(SyncOutput)({"data": source_sync_request(source=source)}).data


_QUERY = "The question or search words, in plain language."
_COLLECTION = "Only passages of this collection (an id from list_collections)."
_DOCUMENT = "Only passages of this document."
_TAGS = "Only passages of documents carrying every one of these tags (case does not matter)."

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="search",
            title="Search the knowledge base",
            description="Rank the passages of the documents you may read for a query, best first. Each hit has its "
            "document (id, title, url), score, the passage text (context) and chunkIndex. The same as POST /api/rag.search.",
            input=RagSearchApi.Input,
            arguments={
                "query": _QUERY,
                "limit": "How many passages to return.",
                "threshold": "Vector mode and hybrid: the least cosine similarity a passage needs (the server's default "
                "suits its embedding model).",
                "collectionId": _COLLECTION,
                "documentId": _DOCUMENT,
                "includeContext": "Return each passage's text (false: ids and scores only).",
                "mode": "hybrid (default: meaning, words and the knowledge graph together), vector (meaning), keyword "
                "(BM25 words) or graph (entities the query names and their neighbours).",
                "weights": "Hybrid only: [vector, keyword] or [vector, keyword, graph] weights, not all zero.",
                "tags": _TAGS,
                "explain": "Add to each hit its rank and score in each ranking (vector, keyword, graph) and the fused score.",
                "includeGraph": "false: hybrid ranks without the knowledge graph.",
            },
            run=_search,
        ),
        Tool(
            name="answer",
            title="Answer a question with citations",
            description="Answer a question from the passages you may read. The answer cites passages as [n]; each "
            "citation gives the document (id, title, url), version, chunkIndex, character offsets and the quoted "
            "passage (context, widened with neighbouring text when the passage was cut mid-thought), the offsets of "
            "the sentence it quotes (quote), and where that is: page (a PDF's), lines ({start, end}) and location "
            "(path:start-end, or path#page=N). confidence is "
            "high, medium, low or insufficient (then the answer says there is not enough information); "
            "confidenceFactors says why (best similarity, supporting passages and documents, age of the newest "
            "supporting version, and the reasons). fastPath says an extractive answer was given without the LLM, "
            "rankings how many passages each ranking found, tokens the LLM's token counts. conversationId and standaloneQuery tell the conversation the "
            "answer belongs to (null with a read-scoped token: its answers are kept in no conversation) and the "
            "question as searched. The same as POST /api/rag.answer.",
            input=AnswerInput,
            arguments={
                "query": _QUERY,
                "collectionId": _COLLECTION,
                "documentId": _DOCUMENT,
                "limit": "How many passages the answer may use.",
                "tags": _TAGS,
                "conversationId": "Continue this conversation (the conversationId of an earlier answer): the question "
                "may then refer to the earlier turns, as in 'and how do I roll it back?'. Absent: a new conversation. "
                "Needs a write-scoped token.",
                "sessionId": "Another name for conversationId (send one of the two).",
                "includeGraph": "false: the knowledge graph neither ranks the passages nor connects them for this answer.",
            },
            run=_answer,
        ),
        Tool(
            name="read_document",
            title="Read a document",
            description="A document you may read: title, collection, version, dates and its markdown text, up to "
            "maxChars characters from offset (textLength is the whole text's length: read on from offset + maxChars). "
            "A document you may not read is not_found, as one that does not exist. The same as POST /api/documents.info.",
            input=ReadDocumentInput,
            arguments={
                "id": "The document's id (from search, answer citations or get_entity passages).",
                "offset": "The first character of the text to return.",
                "maxChars": "How many characters of the text to return at most.",
            },
            run=_read_document,
            input_error=ValidationFailed,
            rag=False,
        ),
        Tool(
            name="list_collections",
            title="List collections",
            description="The collections you may read (id, name, description, defaultAccess), by name; total counts "
            "them all. The same as POST /api/collections.list.",
            input=PaginationInput,
            arguments={"limit": "How many collections to return.", "offset": "How many to skip (paging)."},
            run=_list_collections,
            input_error=ValidationFailed,
            rag=False,
        ),
        Tool(
            name="find_entities",
            title="Find knowledge-graph entities",
            description="Entities of the knowledge graph (documents, names, topics, code identifiers) whose name "
            "contains the query, most mentioned first; counts are of passages you may read. The same as POST "
            "/api/graph.entities.",
            input=GraphEntitiesApi.Input,
            arguments={
                "query": "A part of the entity's name (empty: all entities).",
                "limit": "How many entities to return.",
                "offset": "How many to skip (paging).",
            },
            run=_find_entities,
        ),
        Tool(
            name="get_entity",
            title="Explore an entity",
            description="One entity of the knowledge graph: its neighbours (predicate, direction, confidence, and the "
            "passage each relation was read from as chunkId `<documentId>:<version>:<chunkIndex>`) and the passages "
            "that name it, all from documents you may read. The same as POST /api/graph.entity.",
            input=GraphEntityApi.Input,
            arguments={
                "id": "The entity's id (from find_entities or a neighbour).",
                "limit": "How many neighbours and passages to return.",
            },
            run=_get_entity,
        ),
        Tool(
            name="list_sources",
            title="List sources",
            description="The sources you own (a team admin: every source of the team) that keep collections in sync "
            "with folders, exports, repositories, sites and buckets: kind, configuration (never secrets), collection, "
            "state (active or paused), and the latest sync's counts, progress and errors. The same as POST /api/sources.list.",
            input=PaginationInput,
            arguments={"limit": "How many sources to return.", "offset": "How many to skip (paging)."},
            run=_list_sources,
            input_error=ValidationFailed,
            rag=False,
        ),
        Tool(
            name="sync_source",
            title="Sync a source now",
            description="Queue a sync of one of your sources (or return the one already queued or running): new and "
            "changed items become documents or new versions, items gone from the source archive theirs. Follow it with "
            "list_sources. Needs a write-scoped token. The same as POST /api/sources.sync.",
            input=IdInput,
            arguments={"id": "The source's id (from list_sources)."},
            run=_sync_source,
            input_error=ValidationFailed,
            rag=False,
        ),
    )
}
