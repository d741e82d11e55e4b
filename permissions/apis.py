"""API token endpoints (apiKeys.create, shown once; apiKeys.list; apiKeys.revoke) and the team's groups (groups.*)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.errors import Forbidden, NotFound
from config.rpc import IdInput, PaginationInput, RpcApi, envelope, paginated_envelope, read_through, respond, respond_page
from permissions import selectors, services
from permissions.http import AuthenticatedRequest
from permissions.models import ApiToken, Group, TokenScope, User
from permissions.policy import can_manage_groups
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
        return read_through(super().get_fields(), "token", own="token")


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


class GroupOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    memberCount = serializers.IntegerField(source="member_count")


class GroupMemberOutput(serializers.Serializer):
    id = serializers.UUIDField()
    username = serializers.CharField()


class GroupInfoOutput(GroupOutput):
    members = GroupMemberOutput(many=True, source="member_list", help_text="The group's members, by name.")


class GroupUserInput(IdInput):
    userId = serializers.UUIDField()


def _group_info(group: Group) -> Group:
    """The group as GroupInfoOutput renders it: its members and their count, read now."""
    members = list(selectors.group_members(group=group))
    # ignore: GroupInfoOutput renders a group carrying its members, which are no field of the model.
    group.member_list, group.member_count = members, len(members)  # type: ignore[attr-defined]
    return group


def _managed_group(user: User, group_id: uuid.UUID) -> Group:
    """A group of the team for a team admin; Forbidden for a member of it, NotFound for anyone else."""
    group = selectors.group_get(user=user, group_id=group_id)
    if not can_manage_groups(user):
        raise Forbidden("Only team admins can manage groups.")
    return group


class GroupListApi(RpcApi):
    """Every group of the team for a team admin; for anyone else, the groups they are in."""

    write_scope = False
    Input = PaginationInput
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    @extend_schema(responses=paginated_envelope(GroupOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond_page(GroupOutput, selectors.group_list(user=request.user), limit=data["limit"], offset=data["offset"])


class GroupInfoApi(RpcApi):
    """A group and its members: for a team admin, or a member of the group."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(GroupInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(GroupInfoOutput, _group_info(selectors.group_get(user=request.user, group_id=data["id"])))


class GroupCreateApi(RpcApi):
    write_scope = True
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200)

    @extend_schema(responses=envelope(GroupInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        if not can_manage_groups(request.user):
            raise Forbidden("Only team admins can create groups.")
        return respond(GroupInfoOutput, _group_info(services.group_create(by=request.user, name=data["name"])))


class GroupUpdateApi(RpcApi):
    write_scope = True

    class Input(IdInput):
        name = serializers.CharField(max_length=200)

    @extend_schema(responses=envelope(GroupInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        group = services.group_update(group=_managed_group(request.user, data["id"]), name=data["name"])
        return respond(GroupInfoOutput, _group_info(group))


class GroupDeleteApi(RpcApi):
    """Delete a group: its members lose what was shared with them through it; people and collections stay."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(GroupOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(GroupOutput, services.group_delete(group=_managed_group(request.user, data["id"])))


class GroupAddUserApi(RpcApi):
    write_scope = True
    Input = GroupUserInput

    @extend_schema(responses=envelope(GroupInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        group = _managed_group(request.user, data["id"])
        services.group_member_add(group=group, user=selectors.team_member_get(user=request.user, user_id=data["userId"]))
        return respond(GroupInfoOutput, _group_info(group))


class GroupRemoveUserApi(RpcApi):
    write_scope = True
    Input = GroupUserInput

    @extend_schema(responses=envelope(GroupInfoOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        group = _managed_group(request.user, data["id"])
        services.group_member_remove(group=group, user=selectors.team_member_get(user=request.user, user_id=data["userId"]))
        return respond(GroupInfoOutput, _group_info(group))
