"""The setup page (the first team and its owner), the invite page (joining by link) and the members page (team admins)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from config.csp import with_csp
from config.errors import ApplicationError, NotFound
from permissions.http import AuthenticatedHttpRequest, link_for
from permissions.members import selectors, services
from permissions.members.forms import AccountForm, InviteForm, RoleForm, SetupForm
from permissions.members.services import InviteUnusable
from permissions.models import Invite, InviteStatus, TeamRole, User
from permissions.policy import can_manage_members

MEMBERS_URL = "/team/members"


@require_http_methods(["GET", "POST"])
@never_cache
@with_csp
def setup_page(request: HttpRequest) -> HttpResponse:
    """The first page of an install without a team: it creates the team and its owner, and signs the owner in.
    Once any team exists it is not found, so nobody can take an install over."""
    if selectors.team_exists():
        raise Http404("Cairn is already set up.")
    form = SetupForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        data = form.cleaned_data
        try:
            owner = services.setup_complete(
                team_name=data["team_name"], username=data["username"], password=data["password1"], email=data["email"]
            )
        except NotFound as exc:  # another visitor finished setting up first
            raise Http404(exc.message) from exc
        login(request, owner, backend="django.contrib.auth.backends.ModelBackend")
        return HttpResponseRedirect("/rag")
    return render(request, "permissions/setup.html", {"form": form}, status=400 if form.is_bound else 200)


def _unusable(request: HttpRequest, invite: Invite | None, reason: str) -> HttpResponse:
    # 404 for a link no invite has; 410 (Gone) for one that was used, revoked or has expired.
    return render(request, "permissions/invite_unusable.html", {"reason": reason}, status=404 if invite is None else 410)


@require_http_methods(["GET", "POST"])
@never_cache
@with_csp
def invite_page(request: HttpRequest, token: str) -> HttpResponse:
    """Joining a team by an invite link: choose a username and password, and you are signed in with the invite's role."""
    invite = selectors.invite_for_token(token)
    try:
        services.invite_check(invite)
    except InviteUnusable as exc:
        return _unusable(request, invite, exc.message)
    assert invite is not None, "invite_check refuses a missing invite"
    form = AccountForm(request.POST if request.method == "POST" else None, initial={"email": invite.email})
    if form.is_valid():
        data = form.cleaned_data
        try:
            user = services.invite_accept(
                invite=invite, username=data["username"], password=data["password1"], email=data["email"]
            )
        except InviteUnusable as exc:  # used by someone else while this form was open
            return _unusable(request, invite, exc.message)
        except DjangoValidationError as exc:  # the username was taken meanwhile
            form.add_error(None, exc)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return HttpResponseRedirect("/rag")
    return render(
        request,
        "permissions/invite.html",
        {"form": form, "invite": invite, "signed_in_as": request.user if request.user.is_authenticated else None},
        status=400 if form.is_bound else 200,
    )


def _admin_only(request: AuthenticatedHttpRequest) -> None:
    if not can_manage_members(request.user):
        raise PermissionDenied("Only team admins manage the team's members.")


def _members_page(request: AuthenticatedHttpRequest, *, form: InviteForm | None = None, issued: str = "") -> HttpResponse:
    context: dict[str, Any] = {
        "members": selectors.member_list(fetched_by=request.user),
        "invites": selectors.invite_list(fetched_by=request.user, status=InviteStatus.PENDING),
        "invite_form": form or InviteForm(),
        "roles": TeamRole.choices,
        "issued": issued,
        "lifetime_days": settings.INVITE_LIFETIME_DAYS,
    }
    return render(request, "permissions/members.html", context, status=400 if form is not None and form.errors else 200)


@require_http_methods(["GET"])
@with_csp
@login_required
def members_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The team's people, their roles and last sign-in, and the invites still open."""
    _admin_only(request)
    return _members_page(request)


@require_POST
@never_cache
@with_csp
@login_required
def invite_create_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Create an invite and show its link, this once (the page is not redirected, so the link is never stored)."""
    _admin_only(request)
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _members_page(request, form=form)
    assert request.user.team is not None, "team admins have a team (policy.can_manage_members)"
    issued = services.invite_create(
        team=request.user.team, by=request.user, role=form.cleaned_data["role"], email=form.cleaned_data["email"]
    )
    # The next invite is offered with the same role, as people are often invited several at a time.
    again = InviteForm(initial={"role": form.cleaned_data["role"]})
    return _members_page(request, form=again, issued=link_for(request, issued.path))


def _member(request: AuthenticatedHttpRequest, user_id: uuid.UUID) -> User:
    _admin_only(request)
    try:
        return selectors.member_get(fetched_by=request.user, user_id=user_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _after(request: AuthenticatedHttpRequest, change: Callable[[], object], done: str) -> HttpResponseRedirect:
    """Run `change` (a service call), tell how it went, and go back to the members page."""
    try:
        change()
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, done)
    return HttpResponseRedirect(MEMBERS_URL)


@require_POST
@with_csp
@login_required
def invite_revoke_page(request: AuthenticatedHttpRequest, invite_id: uuid.UUID) -> HttpResponseRedirect:
    _admin_only(request)
    try:
        invite = selectors.invite_get(fetched_by=request.user, invite_id=invite_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    return _after(request, lambda: services.invite_revoke(invite=invite), "Invite revoked: its link no longer works.")


@require_POST
@with_csp
@login_required
def member_role_page(request: AuthenticatedHttpRequest, user_id: uuid.UUID) -> HttpResponseRedirect:
    member = _member(request, user_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role: admin, member or read-only.")
        return HttpResponseRedirect(MEMBERS_URL)
    role = form.cleaned_data["role"]
    return _after(
        request,
        lambda: services.member_role_set(member=member, role=role, by=request.user),
        f"{member.username} is now {TeamRole(role).label.lower()}.",
    )


@require_POST
@with_csp
@login_required
def member_deactivate_page(request: AuthenticatedHttpRequest, user_id: uuid.UUID) -> HttpResponseRedirect:
    member = _member(request, user_id)
    return _after(
        request,
        lambda: services.member_deactivate(member=member, by=request.user),
        f"{member.username} is deactivated: they can no longer sign in or use their API tokens.",
    )


@require_POST
@with_csp
@login_required
def member_activate_page(request: AuthenticatedHttpRequest, user_id: uuid.UUID) -> HttpResponseRedirect:
    member = _member(request, user_id)
    return _after(
        request, lambda: services.member_activate(member=member, by=request.user), f"{member.username} can sign in again."
    )
