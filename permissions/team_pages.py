"""/team/groups, where a team admin manages the team's groups, and /account/tokens, where anyone signed in
manages their own API tokens.

Each page calls the service the `groups.*` or `apiKeys.*` endpoint calls. The group pages are for team
admins (anyone else signed in gets the 403 page, another team's group the 404).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import wraps

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from config.csp import with_csp
from config.errors import NotFound, ValidationFailed
from permissions import selectors, services
from permissions.http import AuthenticatedHttpRequest
from permissions.models import Group, TokenScope
from permissions.policy import can_manage_groups, can_write


class GroupForm(forms.Form):
    name = forms.CharField(max_length=200)


class MemberForm(forms.Form):
    user = forms.UUIDField()


PageView = Callable[..., HttpResponse]


def team_admin_page(view: PageView) -> PageView:
    """Signed in (else the sign-in page), a team admin (else 403); a NotFound from a selector is the 404 page."""

    @with_csp
    @login_required
    @wraps(view)
    def wrapped(request: AuthenticatedHttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if not can_manage_groups(request.user):
            raise PermissionDenied("Only team admins manage groups.")
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(exc.message) from exc

    return wrapped


def _named_form(form: GroupForm, error: ValidationFailed) -> GroupForm:
    """The form with the service's refusal (`name: ...`) shown under its field."""
    form.add_error("name", error.message.removeprefix("name: "))
    return form


@require_http_methods(["GET", "POST"])
@team_admin_page
def groups_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The team's groups, each with its member count; the form creates one."""
    form = GroupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            group = services.group_create(by=request.user, name=form.cleaned_data["name"])
        except ValidationFailed as exc:
            form = _named_form(form, exc)
        else:
            messages.success(request, f'Created the group "{group.name}". Add its members below.')
            return redirect("team-group", group_id=group.pk)
    return render(
        request,
        "permissions/team_groups.html",
        {"groups": selectors.group_list(user=request.user), "form": form, "section": "groups"},
        status=400 if form.errors else 200,
    )


def _group_page(request: AuthenticatedHttpRequest, group: Group, form: GroupForm | None = None) -> HttpResponse:
    members = list(selectors.group_members(group=group))
    # The collections shared with the group, read through the reverse relation: permissions may not import documents.
    shared = group.collection_memberships.filter(collection__deleted_at__isnull=True).order_by("collection__name")
    return render(
        request,
        "permissions/team_group.html",
        {
            "group": group,
            "form": form or GroupForm(initial={"name": group.name}),
            "members": members,
            "others": selectors.team_member_list(user=request.user).exclude(pk__in=[m.pk for m in members]),
            "collections": shared.values("collection_id", "collection__name", "role"),
            "section": "groups",
        },
        status=400 if form is not None and form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
@team_admin_page
def group_page(request: AuthenticatedHttpRequest, group_id: uuid.UUID) -> HttpResponse:
    """A group: its name, its members, and the collections shared with it."""
    group = selectors.group_get(user=request.user, group_id=group_id)
    if request.method == "POST":
        form = GroupForm(request.POST)
        if form.is_valid():
            try:
                services.group_update(group=group, name=form.cleaned_data["name"])
            except ValidationFailed as exc:
                return _group_page(request, group, _named_form(form, exc))
            messages.success(request, "Saved.")
            return redirect("team-group", group_id=group.pk)
        return _group_page(request, group, form)
    return _group_page(request, group)


@require_POST
@team_admin_page
def group_member(request: AuthenticatedHttpRequest, group_id: uuid.UUID) -> HttpResponse:
    """Add a member of the team to the group, or with `remove` set take them out of it."""
    group = selectors.group_get(user=request.user, group_id=group_id)
    form = MemberForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a person.")
        return redirect("team-group", group_id=group.pk)
    person = selectors.team_member_get(user=request.user, user_id=form.cleaned_data["user"])
    if request.POST.get("remove"):
        services.group_member_remove(group=group, user=person)
        messages.success(request, f"{person.get_username()} left {group.name}.")
    else:
        services.group_member_add(group=group, user=person)
        messages.success(request, f"{person.get_username()} joined {group.name}.")
    return redirect("team-group", group_id=group.pk)


@require_http_methods(["GET", "POST"])
@team_admin_page
def group_delete_page(request: AuthenticatedHttpRequest, group_id: uuid.UUID) -> HttpResponse:
    """The confirmation step says what deleting does; only its form's POST deletes."""
    group = selectors.group_get(user=request.user, group_id=group_id)
    if request.method == "POST":
        services.group_delete(group=group)
        messages.success(request, f'Deleted the group "{group.name}".')
        return redirect("team-groups")
    shared = group.collection_memberships.filter(collection__deleted_at__isnull=True).order_by("collection__name")
    return render(
        request,
        "permissions/team_group_delete.html",
        {"group": group, "collections": shared.values_list("collection__name", flat=True), "section": "groups"},
    )


# The expiries the page offers, in days (None: never), those beyond API_TOKEN_MAX_DAYS left out.
EXPIRY_CHOICES = [("30", "in 30 days"), ("90", "in 90 days"), ("365", "in a year"), ("never", "never")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="What the token is for, e.g. ci or my laptop.")
    scope = forms.ChoiceField(choices=TokenScope.choices, initial=TokenScope.READ)
    expires = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="90", label="Expires")

    def __init__(self, data: QueryDict | None = None) -> None:
        super().__init__(data)
        field = self.fields["expires"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(v, label) for v, label in EXPIRY_CHOICES if v == "never" or int(v) <= settings.API_TOKEN_MAX_DAYS]


def _tokens_page(
    request: AuthenticatedHttpRequest, form: TokenForm, issued: services.IssuedToken | None = None, status: int = 200
) -> HttpResponse:
    now = timezone.now()
    tokens = request.user.api_tokens.order_by("-created_at")
    rows = [(t, "revoked" if t.revoked_at else "expired" if t.expires_at and t.expires_at <= now else "active") for t in tokens]
    context = {"form": form, "tokens": rows, "issued": issued, "can_create": can_write(request.user)}
    return render(request, "permissions/account_tokens.html", context, status=status)


@require_http_methods(["GET", "POST"])
@with_csp
@never_cache  # the response to a POST carries a token's secret: no cache may keep it
@login_required
def tokens_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Your API tokens; the form creates one, whose secret this response shows once (it is stored only as a digest)."""
    form = TokenForm(request.POST or None)
    if request.method == "POST" and not can_write(request.user):
        raise PermissionDenied("A read-only member cannot create API tokens.")
    if request.method == "POST" and form.is_valid():
        expires = form.cleaned_data["expires"]
        issued = services.api_token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"],
            expires_at=None if expires == "never" else timezone.now() + timedelta(days=int(expires)),
        )
        return _tokens_page(request, TokenForm(), issued=issued)
    return _tokens_page(request, form, status=400 if form.errors else 200)


@require_POST
@with_csp
@login_required
def token_revoke(request: AuthenticatedHttpRequest, token_id: uuid.UUID) -> HttpResponse:
    """Revoke one of your tokens (and the tokens created from it); anyone else's is the 404 page."""
    token = request.user.api_tokens.filter(pk=token_id).first()
    if token is None:
        raise Http404("API token not found.")
    services.api_token_revoke(token=token)
    messages.success(request, f"Revoked the token {token.prefix}…{f' ({token.name})' if token.name else ''}.")
    return redirect("account-tokens")


urlpatterns = [
    path("team/groups", groups_page, name="team-groups"),
    path("team/groups/<uuid:group_id>", group_page, name="team-group"),
    path("team/groups/<uuid:group_id>/members", group_member, name="team-group-members"),
    path("team/groups/<uuid:group_id>/delete", group_delete_page, name="team-group-delete"),
    path("account/tokens", tokens_page, name="account-tokens"),
    path("account/tokens/<uuid:token_id>/revoke", token_revoke, name="account-token-revoke"),
]
