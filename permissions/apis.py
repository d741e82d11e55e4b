"""API token endpoints: apiKeys.create (shown once), apiKeys.list, apiKeys.revoke."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import NotFound
from permissions.models import TokenScope
from permissions.services import api_token_create, api_token_revoke


class ApiTokenOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    scope = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    revokedAt = serializers.DateTimeField(source="revoked_at")
    lastUsedAt = serializers.DateTimeField(source="last_used_at")


def validated(serializer_class, request) -> dict:
    if not isinstance(request.data, dict):
        raise serializers.ValidationError("The request body must be a JSON object.")
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ApiTokenCreateApi(APIView):
    http_method_names = ["post", "options"]
    write_scope = True

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200, allow_blank=True, default="")
        scope = serializers.ChoiceField(choices=TokenScope.choices, default=TokenScope.READ)
        expiresAt = serializers.DateTimeField(required=False, allow_null=True)

    @extend_schema(request=Input, responses=inline_serializer("ApiTokenCreateResponse", {"data": ApiTokenOutput()}))
    def post(self, request):
        data = validated(self.Input, request)
        issued = api_token_create(user=request.user, scope=data["scope"], name=data["name"], expires_at=data.get("expiresAt"))
        return Response({"data": {**ApiTokenOutput(issued.token).data, "token": issued.plaintext}})


class ApiTokenListApi(APIView):
    http_method_names = ["post", "options"]

    @extend_schema(request=None, responses=inline_serializer("ApiTokenListResponse", {"data": ApiTokenOutput(many=True)}))
    def post(self, request):
        validated(serializers.Serializer, request)
        tokens = request.user.api_tokens.order_by("-created_at")
        return Response({"data": ApiTokenOutput(tokens, many=True).data})


class ApiTokenRevokeApi(APIView):
    http_method_names = ["post", "options"]
    write_scope = True

    class Input(serializers.Serializer):
        id = serializers.UUIDField()

    @extend_schema(request=Input, responses=inline_serializer("ApiTokenRevokeResponse", {"data": ApiTokenOutput()}))
    def post(self, request):
        data = validated(self.Input, request)
        token = request.user.api_tokens.filter(pk=data["id"]).first()
        if token is None:
            raise NotFound("API token not found.")
        return Response({"data": ApiTokenOutput(api_token_revoke(token=token)).data})
