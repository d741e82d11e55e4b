from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest

from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
    ImportFile,
    ImportJob,
    Source,
)


class CollectionMembershipInline(admin.TabularInline):
    model = CollectionMembership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "default_access", "created_at"]
    list_filter = ["team", "default_access"]
    search_fields = ["name"]
    inlines = [CollectionMembershipInline]


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


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "team", "collection", "tags", "version", "published_at", "archived_at", "deleted_at", "updated_at"]
    list_filter = ["team", "collection", TagFilter]
    search_fields = ["title"]
    readonly_fields = ["version", "created_at", "updated_at"]
    inlines = [DocumentMembershipInline]


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
