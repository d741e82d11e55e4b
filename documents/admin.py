from django.contrib import admin

from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
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


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "team", "collection", "version", "published_at", "archived_at", "deleted_at", "updated_at"]
    list_filter = ["team", "collection"]
    search_fields = ["title"]
    readonly_fields = ["version", "created_at", "updated_at"]
    inlines = [DocumentMembershipInline]
