"""What every rag.* endpoint shares: the switch, the throttle, strict input fields and `invalid_query` errors."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers
from rest_framework.throttling import ScopedRateThrottle

from config.errors import InvalidQuery, RagDisabled
from config.rpc import RpcApi


class RagApi(RpcApi):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "rag"
    input_error = InvalidQuery
    error_statuses = (*RpcApi.error_statuses, 503)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not settings.RAG_ENABLED:
            raise RagDisabled("RAG is disabled on this server (RAG_ENABLED=false).")


class QueryField(serializers.CharField):
    MIN_LENGTH = 3  # the longest is RAG_MAX_QUERY_LENGTH

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=True, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string.")
        value = super().to_internal_value(data)
        if len(value) < self.MIN_LENGTH:
            raise serializers.ValidationError(f"must be at least {self.MIN_LENGTH} characters.")
        if len(value) > settings.RAG_MAX_QUERY_LENGTH:
            raise serializers.ValidationError(f"must be at most {settings.RAG_MAX_QUERY_LENGTH} characters.")
        if "\x00" in value:
            raise serializers.ValidationError("must not contain NUL characters.")
        return value


class StrictFloat(serializers.FloatField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise serializers.ValidationError("must be a number.")
        return super().to_internal_value(data)


class StrictInt(serializers.IntegerField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("must be an integer.")
        return super().to_internal_value(data)


class RoundedFloat(serializers.FloatField):
    """A score as the API shows it: six decimals are plenty, and keep responses short."""

    def to_representation(self, value):
        return round(float(value), 6)
