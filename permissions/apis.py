"""API token endpoints: apiKeys.create (shown once), apiKeys.list, apiKeys.revoke."""

from __future__ import annotations

from datetime import datetime

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.errors import NotFound
from config.rpc import RpcApi, envelope, respond
from permissions.http import AuthenticatedRequest
from permissions.models import ApiToken, TokenScope
from permissions.services import api_token_create, api_token_revoke


class ApiTokenOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField(allow_blank=True)
    prefix = serializers.CharField()
    scope = serializers.CharField()
    parentId = serializers.UUIDField(
        source="parent_id", allow_null=True, help_text="The token that created this one; null for one a person created."
    )
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)


class IssuedApiTokenOutput(ApiTokenOutput):
    """A token just issued (an `IssuedToken`): the stored token's fields and its secret, shown this once."""

    token = serializers.CharField(source="plaintext")

    def get_fields(self) -> dict[str, serializers.Field]:
        # The inherited fields read the stored token, `issued.token`; only the secret is the issue's own.
        fields = super().get_fields()
        for name, field in fields.items():
            if name != "token":
                field.source = f"token.{field.source or name}"
        return fields


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date and time that must say its time zone: DRF would read a naive one in the server's."""

    def to_internal_value(self, value: datetime | str) -> datetime:
        try:
            parsed = parse_datetime(value.strip()) if isinstance(value, str) else None
        except ValueError:  # well formed but impossible (month 13): DRF's own parsing says so below
            parsed = None
        if parsed is not None and parsed.tzinfo is None:
            raise serializers.ValidationError("must include a time zone, e.g. 2027-01-31T00:00:00Z.")
        return super().to_internal_value(value)


class ApiTokenCreateApi(RpcApi):
    write_scope = True
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200, allow_blank=True, default="")
        scope = serializers.ChoiceField(choices=TokenScope.choices, default=TokenScope.READ)
        expiresAt = AwareDateTimeField(required=False, allow_null=True)

    @extend_schema(responses=envelope(IssuedApiTokenOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        # A token creating a token is its parent; a signed-in person creates a token of their own.
        parent = request.auth if isinstance(request.auth, ApiToken) else None
        issued = api_token_create(
            user=request.user, scope=data["scope"], name=data["name"], expires_at=data.get("expiresAt"), parent=parent
        )
        return respond(IssuedApiTokenOutput, issued)


class ApiTokenListApi(RpcApi):
    write_scope = False
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    @extend_schema(responses=envelope(ApiTokenOutput, many=True))
    def post(self, request: AuthenticatedRequest) -> Response:
        self.validated(request)
        return respond(ApiTokenOutput, request.user.api_tokens.order_by("-created_at"), many=True)


class ApiTokenRevokeApi(RpcApi):
    write_scope = True

    class Input(serializers.Serializer):
        id = serializers.UUIDField()

    @extend_schema(responses=envelope(ApiTokenOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        token = request.user.api_tokens.filter(pk=data["id"]).first()
        if token is None:
            raise NotFound("API token not found.")
        return respond(ApiTokenOutput, api_token_revoke(token=token))
