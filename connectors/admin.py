from __future__ import annotations

from django.contrib import admin

from connectors.models import SourceSync, SyncedSource


@admin.register(SyncedSource)
class SyncedSourceAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "team", "collection", "state", "interval_minutes", "next_sync_at")
    list_filter = ("kind", "state")
    search_fields = ("name",)
    # The secrets stay encrypted and out of sight: an admin page is one more place they could leak.
    exclude = ("secrets",)
    readonly_fields = ("archive", "cursor", "last_sync")


@admin.register(SourceSync)
class SourceSyncAdmin(admin.ModelAdmin):
    list_display = ("source", "trigger", "stage", "seen", "created", "changed", "unchanged", "deleted", "failed", "created_at")
    list_filter = ("stage", "trigger")
    readonly_fields = [f.name for f in SourceSync._meta.fields]
