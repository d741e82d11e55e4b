"""/team/collections: a team admin creates, renames, shares and deletes the team's collections.

Each page calls the service the `collections.*` endpoint calls; who may do what is the API's rule,
narrowed to team admins (anyone else signed in gets the 403 page, another team's collection the 404).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from config.csp import with_csp
from config.errors import NotFound
from documents import selectors, services
from documents.models import Collection, Document
from permissions.http import AuthenticatedHttpRequest
from permissions.models import Access, Role
from permissions.policy import can_manage_collections
from permissions.selectors import group_list, team_group_get, team_member_get, team_member_list

ACCESS_HELP = {
    Access.READ_WRITE: "everyone in the team reads and adds documents",
    Access.READ: "everyone in the team reads; only those it is shared with add documents",
    Access.NONE: "only the groups and people it is shared with, and team admins to manage it",
}


class CollectionForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 2}))
    default_access = forms.ChoiceField(
        choices=[(value, f"{label}: {ACCESS_HELP[Access(value)]}") for value, label in Access.choices],
        initial=Access.READ_WRITE,
        label="Team access",
    )


class GrantForm(forms.Form):
    """Share with a group or a person: `grantee` is `group:<id>` or `user:<id>`."""

    grantee = forms.RegexField(regex=r"^(group|user):[0-9a-f-]{36}$")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.READ, required=False)


AdminView = Callable[..., HttpResponse]


def team_admin_page(view: AdminView) -> AdminView:
    """Signed in (else the sign-in page), a team admin (else 403); a NotFound from a selector is the 404 page."""

    @with_csp
    @login_required
    @wraps(view)
    def wrapped(request: AuthenticatedHttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if not can_manage_collections(request.user):
            raise PermissionDenied("Only team admins manage collections.")
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(exc.message) from exc

    return wrapped


def _collection(request: AuthenticatedHttpRequest, collection_id: uuid.UUID) -> Collection:
    return selectors.collection_get_to_change(user=request.user, collection_id=collection_id)


@require_http_methods(["GET", "POST"])
@team_admin_page
def collections_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The team's collections; the form creates one (its creator becomes a read-write member)."""
    form = CollectionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            collection = services.collection_create(
                by=request.user,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                default_access=form.cleaned_data["default_access"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f'Created "{collection.name}". Share it with groups and people below.')
            return redirect("team-collection", collection_id=collection.pk)
    return render(
        request,
        "documents/team_collections.html",
        {"collections": selectors.team_collection_list(user=request.user), "form": form, "section": "collections"},
        status=400 if form.errors else 200,
    )


def _settings_form(collection: Collection, data: QueryDict | None = None) -> CollectionForm:
    initial = {"name": collection.name, "description": collection.description, "default_access": collection.default_access}
    return CollectionForm(data, initial=initial)


def _collection_page(
    request: AuthenticatedHttpRequest, collection: Collection, form: CollectionForm | None = None, error: str = ""
) -> HttpResponse:
    form = form or _settings_form(collection)
    grants = selectors.collection_grants(collection=collection)
    granted = {(g.kind, g.id) for g in grants}
    return render(
        request,
        "documents/team_collection.html",
        {
            "collection": collection,
            "form": form,
            "grants": grants,
            "groups": [g for g in group_list(user=request.user) if ("group", g.pk) not in granted],
            "people": [u for u in team_member_list(user=request.user) if ("user", u.pk) not in granted],
            "roles": Role.choices,
            "error": error,
            "section": "collections",
        },
        status=400 if error or form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
@team_admin_page
def collection_page(request: AuthenticatedHttpRequest, collection_id: uuid.UUID) -> HttpResponse:
    """A collection's settings (name, description, team access) and whom it is shared with."""
    collection = _collection(request, collection_id)
    form = _settings_form(collection, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.collection_update(
                collection=collection,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                default_access=form.cleaned_data["default_access"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Saved.")
            return redirect("team-collection", collection_id=collection.pk)
    return _collection_page(request, collection, form)


@require_POST
@team_admin_page
def collection_grant(request: AuthenticatedHttpRequest, collection_id: uuid.UUID) -> HttpResponse:
    """Share the collection with a group or a person, or with `remove` set stop sharing it with them."""
    collection = _collection(request, collection_id)
    form = GrantForm(request.POST)
    if not form.is_valid():
        return _collection_page(request, collection, error="Choose a group or a person to share it with.")
    kind, grantee_id = form.cleaned_data["grantee"].split(":", 1)
    group = team_group_get(user=request.user, group_id=uuid.UUID(grantee_id)) if kind == "group" else None
    person = team_member_get(user=request.user, user_id=uuid.UUID(grantee_id)) if kind == "user" else None
    name = group.name if group is not None else person.get_username() if person is not None else ""
    if request.POST.get("remove"):
        services.collection_membership_remove(collection=collection, user=person, group=group)
        messages.success(request, f"{collection.name} is no longer shared with {name}.")
    else:
        role = form.cleaned_data["role"] or Role.READ
        services.collection_membership_set(collection=collection, user=person, group=group, role=role)
        messages.success(request, f"{name} now has {Role(role).label.lower()} access to {collection.name}.")
    return redirect("team-collection", collection_id=collection.pk)


@require_http_methods(["GET", "POST"])
@team_admin_page
def collection_delete_page(request: AuthenticatedHttpRequest, collection_id: uuid.UUID) -> HttpResponse:
    """The confirmation step says what deleting does; only its form's POST deletes."""
    collection = _collection(request, collection_id)
    if request.method == "POST":
        services.collection_delete(collection=collection, confirm=True)
        messages.success(request, f'Deleted "{collection.name}" and the documents in it.')
        return redirect("team-collections")
    # Counted through the access policy: the page never tells an admin how many documents they cannot read.
    readable = Document.objects.visible_to(request.user, include_archived=True).filter(collection=collection).count()
    return render(
        request,
        "documents/team_collection_delete.html",
        {
            "collection": collection,
            "readable": readable,
            "grants": selectors.collection_grants(collection=collection),
            "section": "collections",
        },
    )


urlpatterns = [
    path("team/collections", collections_page, name="team-collections"),
    path("team/collections/<uuid:collection_id>", collection_page, name="team-collection"),
    path("team/collections/<uuid:collection_id>/share", collection_grant, name="team-collection-share"),
    path("team/collections/<uuid:collection_id>/delete", collection_delete_page, name="team-collection-delete"),
]
