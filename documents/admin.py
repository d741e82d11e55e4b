from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.text import capfirst

from documents import services
from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
    ImportFile,
    ImportJob,
    Source,
)
from permissions.models import User

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups


class CollectionMembershipInline(admin.TabularInline):
    model = CollectionMembership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "default_access", "created_at", "deleted_at"]
    list_filter = ["team", "default_access", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    readonly_fields = ["deleted_at"]
    inlines = [CollectionMembershipInline]
    actions = ["restore"]

    def get_readonly_fields(self, request: HttpRequest, obj: Collection | None = None) -> list[str]:
        # Its documents, their passages and graph facts belong to its team: a collection keeps it.
        return [*self.readonly_fields, "team"] if obj else list(self.readonly_fields)

    @admin.action(
        description="Restore selected deleted collections (and the documents deleted with them)", permissions=["change"]
    )
    def restore(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        collections = list(queryset.filter(deleted_at__isnull=False))
        for collection in collections:
            services.collection_restore(collection=collection)
        self.message_user(request, f"Restored {len(collections)} collection(s).")


class DocumentMembershipInline(admin.TabularInline):
    model = DocumentMembership
    extra = 0
    autocomplete_fields = ["user"]


class TagFilter(admin.SimpleListFilter):
    """The most used tags (of every team: the admin sees them all)."""

    title = "tag"
    parameter_name = "tag"
    shown = 30

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT t.tag FROM documents_document d, unnest(d.tags) AS t(tag) WHERE d.deleted_at IS NULL "
                "GROUP BY t.tag ORDER BY count(*) DESC, t.tag LIMIT %s",
                [self.shown],
            )
            return [(tag, tag) for (tag,) in cursor.fetchall()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> QuerySet[Document]:
        return queryset.filter(tags__contains=[self.value()]) if self.value() else queryset


class CollectionChoiceField(forms.ModelChoiceField):
    """Collections named with their team: names repeat across teams."""

    def label_from_instance(self, obj: Collection) -> str:
        return f"{obj.team.name} / {obj.name}"


class DocumentAdminForm(forms.ModelForm):
    collection = CollectionChoiceField(queryset=Collection.objects.select_related("team").order_by("team__name", "name"))
    publish = forms.BooleanField(required=False, help_text="Publish it now; until then only its author reads it.")

    class Meta:
        model = Document
        fields = ["collection", "title", "text", "tags"]


DocumentChange = Callable[..., Document]


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    """Every write goes through the document services, as the API's do: a text change is a new version,
    and what search, answers and the graph read follows (indexing is queued once the save commits)."""

    list_display = ["title", "team", "collection", "tags", "version", "published_at", "archived_at", "deleted_at", "updated_at"]
    list_filter = ["team", "collection", TagFilter]
    search_fields = ["title"]
    form = DocumentAdminForm
    fields = [
        *("team", "collection", "title", "text", "tags", "publish", "version", "created_by"),
        *("created_at", "updated_at", "published_at", "archived_at", "deleted_at"),
    ]
    # The lifecycle changes through the actions below, each a service.
    readonly_fields = [
        *("team", "version", "created_by", "created_at", "updated_at", "published_at", "archived_at", "deleted_at"),
    ]
    inlines = [DocumentMembershipInline]
    actions = ["publish", "archive", "unarchive", "restore"]

    def get_fields(self, request: HttpRequest, obj: Document | None = None) -> _FieldGroups:
        published = obj is not None and obj.published_at is not None
        return [f for f in self.fields or [] if not (published and f == "publish")]

    def save_model(self, request: HttpRequest, obj: Document, form: DocumentAdminForm, change: bool) -> None:
        data = form.cleaned_data
        if change:
            # `obj` holds the form's values but the row does not yet: each service reads it again, locked.
            document = services.document_move(document=obj, collection=data["collection"])
            document = services.document_update(
                document=document,
                by=request.user if isinstance(request.user, User) else None,
                title=data["title"],
                text=data["text"],
                tags=data["tags"],
                publish=data.get("publish", False),
            )
        else:
            assert isinstance(request.user, User), "the admin serves signed-in staff only"
            document = services.document_create(
                by=request.user,
                collection=data["collection"],
                title=data["title"],
                text=data["text"],
                tags=data["tags"],
                publish=data.get("publish", False),
            )
        # The admin goes on with `obj` (the inlines, its log, the redirect): make it the row the services wrote.
        obj.pk = document.pk
        obj.refresh_from_db()
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        services.document_delete(document=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset:
            services.document_delete(document=document)

    def get_deleted_objects(
        self, objs: Iterable[Document], request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """What a delete here changes: the documents only, marked deleted as the API does (their passages leave the
        index; *Restore* brings them back), so no permission on the index's rows is needed."""
        documents = list(objs)
        shown = [format_html("{}: {}", capfirst(Document._meta.verbose_name), d) for d in documents]
        return shown, {str(Document._meta.verbose_name_plural): len(documents)}, set(), []

    def _each(self, request: HttpRequest, queryset: QuerySet[Document], change: DocumentChange, done: str) -> None:
        documents = list(queryset)
        for document in documents:
            change(document=document)
        self.message_user(request, f"{done} {len(documents)} document(s).")

    @admin.action(description="Publish selected documents", permissions=["change"])
    def publish(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._each(request, queryset, services.document_publish, "Published")

    @admin.action(description="Archive selected documents", permissions=["change"])
    def archive(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._each(request, queryset, services.document_archive, "Archived")

    @admin.action(description="Unarchive selected documents", permissions=["change"])
    def unarchive(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._each(request, queryset, services.document_unarchive, "Unarchived")

    @admin.action(description="Restore selected deleted documents", permissions=["change"])
    def restore(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._each(request, queryset, services.document_restore, "Restored")


class ImportFileInline(admin.TabularInline):
    model = ImportFile
    extra = 0
    can_delete = False
    fields = ["path", "outcome", "format", "size", "error", "document"]
    readonly_fields = ["path", "outcome", "format", "size", "error", "document"]

    def has_add_permission(self, request: HttpRequest, obj: ImportJob | None = None) -> bool:
        return False


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = [
        "origin",
        "team",
        "collection",
        "created_by",
        "stage",
        "files_done",
        "files_total",
        "files_failed",
        "created_at",
    ]
    list_filter = ["stage", "team"]
    search_fields = ["origin"]
    fields = [
        "origin",
        "team",
        "collection",
        "created_by",
        "publish",
        "stage",
        ("files_done", "files_total", "files_failed"),
        "error",
        ("created_at", "started_at", "finished_at"),
    ]
    readonly_fields = [
        *("origin", "team", "collection", "created_by", "publish", "stage", "files_done", "files_total", "files_failed"),
        *("error", "created_at", "started_at", "finished_at"),
    ]
    inlines = [ImportFileInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs start from documents.import, the /import page or import_path


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["path", "document", "document_version", "format", "size", "created_at"]
    list_filter = ["format", "team"]
    search_fields = ["path", "sha256"]
    readonly_fields = [f.name for f in Source._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
