"""The RPC API base every endpoint shares: `POST /api/<resource>.<verb>`, a JSON object in, `{"data": ...}` out.

A view subclasses `RpcApi`, declares whether it changes anything (`write_scope`, which a
read-scoped token is refused on) and a nested `Input` serializer, reads its body with
`self.validated(request)`, makes one service or selector call and answers with
`respond(Output, instance)` or `respond_page(Output, queryset, limit=..., offset=...)`.
Its schema is one line, `@extend_schema(responses=envelope(Output))`: the envelope
serializer that documents the response is the one that renders it.
"""

from __future__ import annotations

from functools import cache
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.http import QueryDict
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.utils import Direction, extend_schema_serializer
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import ApplicationError, ValidationFailed
from config.exceptions import first_message

if TYPE_CHECKING:  # the stubs' types of a view function, not in DRF itself
    from rest_framework.views import AsView, GenericView

SerializerClass = type[serializers.Serializer]


@extend_schema_serializer(component_name="Error")
class ErrorOutput(serializers.Serializer):
    """Every error response: a stable code and a message for people (built by `config.errors.error_body`)."""

    error = serializers.CharField()
    message = serializers.CharField()


@extend_schema_serializer(component_name="Pagination")
class PaginationOutput(serializers.Serializer):
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    total = serializers.IntegerField(help_text="How many items match, over all pages.")


def _response_name(output: SerializerClass, kind: str) -> str:
    return f"{output.__name__.removesuffix('Output')}{kind}Response"


@cache
def _envelope(output: SerializerClass, many: bool) -> SerializerClass:
    # Cached so each output has one envelope class, and so one schema component.
    fields = {"__module__": __name__, "data": output(many=many)}
    return type(_response_name(output, "List" if many else ""), (serializers.Serializer,), fields)


def envelope(output: SerializerClass, *, many: bool = False) -> SerializerClass:
    """The serializer of `{"data": output}` (a list of them with `many`), named `<Entity>[List]Response`."""
    return _envelope(output, many)


@cache
def paginated_envelope(output: SerializerClass) -> SerializerClass:
    """The serializer of `{"data": [output], "pagination": {"limit", "offset", "total"}}`, named `<Entity>PageResponse`."""
    fields = {"__module__": __name__, "data": output(many=True), "pagination": PaginationOutput()}
    return type(_response_name(output, "Page"), (serializers.Serializer,), fields)


def respond(output: SerializerClass, instance: Any, *, many: bool = False) -> Response:
    """`{"data": ...}`: `instance` (an iterable of them with `many`) rendered by `output`."""
    return Response(envelope(output, many=many)({"data": instance}).data)


def page_body(output: SerializerClass, queryset: QuerySet, *, limit: int, offset: int) -> dict[str, Any]:
    """One page of `queryset` in `data`; `pagination.total` counts every match, not the page."""
    body = {
        "data": queryset[offset : offset + limit],
        "pagination": {"limit": limit, "offset": offset, "total": queryset.count()},
    }
    return paginated_envelope(output)(body).data


def respond_page(output: SerializerClass, queryset: QuerySet, *, limit: int, offset: int) -> Response:
    """`page_body` as the response."""
    return Response(page_body(output, queryset, limit=limit, offset=offset))


class PaginationInput(serializers.Serializer):
    """The body of a paginated list: `limit` items from `offset`."""

    limit = serializers.IntegerField(min_value=1, max_value=100, default=25)
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


class IdInput(serializers.Serializer):
    """The body of an endpoint about one thing: its `id`."""

    id = serializers.UUIDField()


def read_through(fields: dict[str, serializers.Field], attribute: str, *, own: str) -> dict[str, serializers.Field]:
    """An output of something just issued (a token, an invite): every field but `own` reads the stored object at
    `attribute`, so the issue's output inherits the stored thing's output and adds only what is shown once."""
    for name, field in fields.items():
        if name != own:
            field.source = f"{attribute}.{field.source or name}"
    return fields


# JSON's type for each kind of input field: DRF would turn 123 into "123" or "1" into True; the API refuses.
_JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...], str], ...] = (
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.ListField, (list,), "a list"),
    (serializers.Serializer, (dict,), "an object"),
    (serializers.CharField, (str,), "a string"),
    (serializers.UUIDField, (str,), "a string"),
    (serializers.DateTimeField, (str,), "a string"),
    (serializers.ChoiceField, (str,), "a string"),
)


def _json_type_error(field: serializers.Field, value: Any) -> str | None:
    """Why `value` has the wrong JSON type for `field`, or None; null is left to the field's allow_null."""
    if value is None:
        return None
    for kind, types, label in _JSON_TYPES:
        if isinstance(field, kind):
            if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
                return f"must be {label}."
            if isinstance(field, serializers.ListField) and isinstance(value, list):
                for item in value:
                    if error := _json_type_error(field.child, item):
                        return f"each item {error}"
            return None
    return None


def check_json_types(serializer: serializers.Serializer, body: dict[str, Any]) -> None:
    """Refuse a field whose JSON type is not the declared one (`"text": 123`, `"publish": "yes"`)."""
    for name, field in serializer.fields.items():
        if name in body and (error := _json_type_error(field, body[name])):
            raise serializers.ValidationError({name: [error]})


def check_known_fields(
    serializer: serializers.Serializer, body: Any, *, taker: str = "this endpoint", noun: str = "field", path: str = ""
) -> None:
    """Refuse a field `taker` does not declare, in the body or an object inside it: DRF drops it silently,
    so a misspelled `limt` or a `"permission": "none"` meant as `defaultAccess` would be lost unseen."""
    if not isinstance(body, dict):
        return
    fields = {name: field for name, field in serializer.fields.items() if not field.read_only}
    for name in body:
        if name not in fields:
            raise serializers.ValidationError({f"{path}{name}": [f"no such {noun}; {taker} takes {', '.join(fields)}."]})
    for name, field in fields.items():
        value = body.get(name)
        if isinstance(field, serializers.Serializer):
            check_known_fields(field, value, taker=taker, noun=noun, path=f"{path}{name}.")
        elif isinstance(field, serializers.ListField) and isinstance(field.child, serializers.Serializer):
            for index, item in enumerate(value if isinstance(value, list) else []):
                check_known_fields(field.child, item, taker=taker, noun=noun, path=f"{path}{name}[{index}].")


def validate_body(serializer_class: SerializerClass, request: Request) -> dict[str, Any]:
    """The request body, which must be a JSON object, validated by `serializer_class`; raises DRF's errors."""
    try:
        body = request.data
    except RecursionError as exc:
        # json.loads recurses once per level of nesting, and DRF's parser lets the error out as a 500.
        raise exceptions.ParseError("The request body is nested too deeply.") from exc
    if not isinstance(body, dict):
        raise serializers.ValidationError("The request body must be a JSON object.")
    serializer = serializer_class(data=body)
    check_known_fields(serializer, body)
    # Form fields (a multipart upload) are text by nature; only a JSON body has types to hold to.
    if not isinstance(body, QueryDict):
        check_json_types(serializer, body)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# What any endpoint may answer whatever it does: a wrong method, an Accept without JSON, a body over
# DATA_UPLOAD_MAX_MEMORY_SIZE, an unexpected failure.
ANY_ENDPOINT_ERRORS = (405, 406, 413, 500)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "permissions.authentication.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An API token: `Authorization: Bearer cairn_...`."}


class RpcSchema(AutoSchema):
    """An RPC operation in the OpenAPI schema: named after its endpoint, its body read from the view's
    `Input`, and the view's `error_statuses` answered by the shared `Error` component."""

    def get_operation_id(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def get_tags(self) -> list[str]:
        return [self.get_operation_id().split(".", 1)[0]]

    # ignore: AutoSchema's get_description takes no arguments (drf-spectacular ignores the same override
    # error); DRF's stubs type the ViewInspector base's with (path, method).
    def get_description(self) -> str:  # type: ignore[override]
        # Only the view's own docstring: inherited, RpcApi's would describe every endpoint.
        return (type(self.view).__doc__ or "").strip()

    def get_request_serializer(self) -> SerializerClass | None:
        view = self.view
        assert isinstance(view, RpcApi), "RpcSchema is the schema of RpcApi views only"
        return view.Input

    def get_serializer_name(self, serializer: serializers.Serializer, direction: Direction) -> str:
        # Nested inputs are named after their view (DocumentCreateApi.Input -> DocumentCreateInput), not all "Input".
        return "".join(part.removesuffix("Api") for part in type(serializer).__qualname__.split("."))

    def _map_basic_serializer(self, serializer: serializers.Serializer, direction: Direction) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            schema["additionalProperties"] = False  # `check_known_fields` refuses any other field
        return schema

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: ComponentRegistry
    ) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is not None:
            view = self.view
            assert isinstance(view, RpcApi), "RpcSchema is the schema of RpcApi views only"
            error = {"application/json": {"schema": self.resolve_serializer(ErrorOutput, "response").ref}}
            # Every endpoint may also answer these (config.middleware, config.exceptions), always with `Error`.
            for status in (*view.error_statuses, *ANY_ENDPOINT_ERRORS):
                operation["responses"].setdefault(str(status), {"description": HTTPStatus(status).phrase, "content": error})
        return operation


class RpcApi(APIView):
    """Base of every RPC endpoint; see the module docstring."""

    http_method_names = ["post", "options"]
    schema = RpcSchema()
    # The body's fields; None takes no fields (the body must still be a JSON object).
    Input: SerializerClass | None = None
    # What a bad body raises: validation_error here, invalid_query for rag.*.
    input_error: type[ApplicationError] = ValidationFailed
    # Read by permissions.authentication.HasTokenScope: True, a token needs the write scope. Every
    # endpoint declares it (True if it changes anything), so none can forget it: see `as_view`.
    write_scope: ClassVar[bool]
    # Its reads may go to a read replica (config/replicas.py): set on search, answers, graph and document reads.
    replica_reads: ClassVar[bool] = False
    # The error responses the schema declares, each with the `Error` body.
    error_statuses: tuple[int, ...] = (400, 401, 403, 404, 429)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> AsView[GenericView]:
        if not isinstance(getattr(cls, "write_scope", None), bool):
            raise ImproperlyConfigured(f"{cls.__name__} must declare write_scope: True if it changes anything, else False.")
        return super().as_view(**initkwargs)

    def validated(self, request: Request) -> dict[str, Any]:
        """The body, validated by `Input`; a malformed or invalid body raises `input_error`."""
        try:
            return validate_body(self.Input or serializers.Serializer, request)
        except (exceptions.ValidationError, exceptions.ParseError, exceptions.UnsupportedMediaType) as exc:
            raise self.input_error(first_message(exc.detail)) from exc
