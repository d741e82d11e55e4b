"""users.* and invites.*: a team's people and the links that let more in, in the caller's own team only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.errors import Forbidden
from config.rpc import IdInput, PaginationInput, RpcApi, envelope, paginated_envelope, read_through, respond, respond_page
from permissions.http import AuthenticatedRequest, link_for
from permissions.members import selectors, services
from permissions.models import InviteStatus, TeamRole
from permissions.policy import can_manage_members


class UserOutput(serializers.Serializer):
    id = serializers.UUIDField()
    username = serializers.CharField()
    email = serializers.CharField(allow_blank=True)
    role = serializers.CharField(help_text="admin, member or read_only.")
    isActive = serializers.BooleanField(source="is_active", help_text="false once deactivated: no sign-in, no API token.")
    lastSignInAt = serializers.DateTimeField(source="last_login", allow_null=True, help_text="Last sign-in on the pages.")
    createdAt = serializers.DateTimeField(source="date_joined")


class InviteOutput(serializers.Serializer):
    id = serializers.UUIDField()
    email = serializers.CharField(allow_blank=True)
    role = serializers.CharField(help_text="The role the person who accepts gets: admin, member or read_only.")
    status = serializers.CharField(help_text="pending, accepted, revoked or expired.")
    createdBy = serializers.UUIDField(source="created_by_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    acceptedBy = serializers.UUIDField(source="accepted_by_id", allow_null=True)
    acceptedAt = serializers.DateTimeField(source="accepted_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)


class IssuedInviteOutput(InviteOutput):
    """An invite just created (an `IssuedInvite`) and its link, shown this once."""

    url = serializers.CharField(help_text="The link to send; only its digest is stored, so it cannot be shown again.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # The inherited fields read the stored invite, `issued.invite`; the link is the issue's own.
        return read_through(super().get_fields(), "invite", own="url")


def _admin_only(request: AuthenticatedRequest, refusal: str) -> None:
    if not can_manage_members(request.user):
        raise Forbidden(refusal)


class UserListApi(RpcApi):
    """The people of your team, deactivated ones included, by username."""

    write_scope = False
    Input = PaginationInput
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    @extend_schema(responses=paginated_envelope(UserOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        members = selectors.member_list(fetched_by=request.user)
        return respond_page(UserOutput, members, limit=data["limit"], offset=data["offset"])


class UserInfoApi(RpcApi):
    """One person of your team; anyone else is not_found."""

    write_scope = False
    Input = IdInput

    @extend_schema(responses=envelope(UserOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        return respond(UserOutput, selectors.member_get(fetched_by=request.user, user_id=data["id"]))


class UserUpdateApi(RpcApi):
    """Change a person's role (team admins; never your own, never the last admin's)."""

    write_scope = True

    class Input(IdInput):
        role = serializers.ChoiceField(choices=TeamRole.choices)

    @extend_schema(responses=envelope(UserOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can change roles.")
        member = selectors.member_get(fetched_by=request.user, user_id=data["id"])
        return respond(UserOutput, services.member_role_set(member=member, role=data["role"], by=request.user))


class UserDeactivateApi(RpcApi):
    """Stop a person signing in and using their API tokens; their documents stay (team admins; not yourself,
    not the last admin)."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(UserOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can deactivate people.")
        member = selectors.member_get(fetched_by=request.user, user_id=data["id"])
        return respond(UserOutput, services.member_deactivate(member=member, by=request.user))


class UserActivateApi(RpcApi):
    """Let a deactivated person sign in again, with their role and tokens as they were (team admins)."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(UserOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can reactivate people.")
        member = selectors.member_get(fetched_by=request.user, user_id=data["id"])
        return respond(UserOutput, services.member_activate(member=member, by=request.user))


class InviteCreateApi(RpcApi):
    """A link that lets one person join your team with `role`, for INVITE_LIFETIME_DAYS (team admins)."""

    write_scope = True
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    class Input(serializers.Serializer):
        email = serializers.EmailField(allow_blank=True, default="", help_text="Whom the link is for (a note).")
        role = serializers.ChoiceField(choices=TeamRole.choices, default=TeamRole.MEMBER)

    @extend_schema(responses=envelope(IssuedInviteOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can invite people.")
        assert request.user.team is not None, "team admins have a team (policy.can_manage_members)"
        issued = services.invite_create(team=request.user.team, by=request.user, role=data["role"], email=data["email"])
        return respond(IssuedInviteOutput, {"invite": issued.invite, "url": link_for(request, issued.path)})


class InviteListApi(RpcApi):
    """Your team's invites, newest first; `status` keeps one kind (team admins)."""

    write_scope = False
    error_statuses = (400, 401, 403, 429)  # nothing is looked up, so never 404

    class Input(PaginationInput):
        status = serializers.ChoiceField(choices=InviteStatus.choices, required=False)

    @extend_schema(responses=paginated_envelope(InviteOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can see the team's invites.")
        invites = selectors.invite_list(fetched_by=request.user, status=data.get("status"))
        return respond_page(InviteOutput, invites, limit=data["limit"], offset=data["offset"])


class InviteRevokeApi(RpcApi):
    """Make an invite's link stop working (team admins); an accepted invite is refused."""

    write_scope = True
    Input = IdInput

    @extend_schema(responses=envelope(InviteOutput))
    def post(self, request: AuthenticatedRequest) -> Response:
        data = self.validated(request)
        _admin_only(request, "Only team admins can revoke invites.")
        invite = selectors.invite_get(fetched_by=request.user, invite_id=data["id"])
        return respond(InviteOutput, services.invite_revoke(invite=invite))
