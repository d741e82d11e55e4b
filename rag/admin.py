"""Admin: indexing status and jobs, reindex / cleanup actions, and the search and answer logs (zero results, top queries, low ratings)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Avg, Count, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Lower
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from documents.admin import CollectionAdmin, DocumentAdmin
from documents.models import Collection, Document
from permissions.admin import TeamAdmin
from permissions.http import AuthenticatedHttpRequest
from permissions.models import Team
from rag.indexing.cleanup import CleanupReport, cleanup_embeddings
from rag.indexing.index_status import mark_pending
from rag.indexing.jobs import job_create
from rag.indexing.model_switch import coverage
from rag.models import (
    Chunk,
    Entity,
    Feedback,
    GraphExtraction,
    IndexJob,
    IndexState,
    IndexStatus,
    QueryLog,
    Relation,
    SearchLog,
    ServingModel,
)
from rag.tasks import enqueue_reindex


def queue_reindex(request: AuthenticatedHttpRequest, documents: QuerySet[Document], description: str) -> None:
    ids = list(documents.filter(deleted_at__isnull=True).values_list("pk", flat=True))
    if not ids:
        messages.info(request, "No documents to reindex.")
        return
    model_id = settings.RAG_EMBEDDING_MODEL
    mark_pending(document_ids=ids, model_id=model_id)
    job = job_create(description=description, total=len(ids), model_id=model_id, by=request.user)
    queued = enqueue_reindex(ids, job=job)
    if queued < len(ids):
        messages.error(
            request, f"The task queue cannot be reached: queued {queued} of {len(ids)} document(s); reindex again later."
        )
        return
    messages.success(request, f"Queued {len(ids)} document(s) for reindexing; follow job {job.pk} under Index jobs.")


def report_cleanup(request: HttpRequest, report: CleanupReport) -> None:
    messages.success(
        request,
        f"Deleted {sum(report.obsolete_models.values())} chunk(s) of obsolete models and {report.orphaned_chunks} of deleted documents.",
    )
    for model_id, teams in report.still_serving.items():
        messages.warning(
            request,
            f"Kept {model_id}: {teams} team(s) are still searched with it until {settings.RAG_EMBEDDING_MODEL} covers them "
            "(see Serving models). Clean up again after the switch.",
        )


class IndexStateFilter(admin.SimpleListFilter):
    title = "index state"
    parameter_name = "index_state"

    def lookups(self, request, model_admin):
        return [*IndexState.choices, ("none", "Never indexed")]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        current = IndexStatus.objects.filter(model_id=settings.RAG_EMBEDDING_MODEL)
        if value == "none":
            return queryset.exclude(pk__in=current.values("document_id"))
        return queryset.filter(pk__in=current.filter(state=value).values("document_id"))


admin.site.unregister(Document)


@admin.register(Document)
class IndexedDocumentAdmin(DocumentAdmin):
    list_display = [*DocumentAdmin.list_display, "index_state", "graph_facts"]
    list_filter = [*DocumentAdmin.list_filter, IndexStateFilter]
    actions = [*DocumentAdmin.actions, "reindex"]

    def get_queryset(self, request):
        status = IndexStatus.objects.filter(document=OuterRef("pk"), model_id=settings.RAG_EMBEDDING_MODEL)
        return (
            super()
            .get_queryset(request)
            .annotate(_index_state=Subquery(status.values("state")[:1]), _index_error=Subquery(status.values("error")[:1]))
        )

    @admin.display(description="index")
    def index_state(self, obj) -> str:
        state = obj._index_state or "not indexed"
        return f"{state}: {obj._index_error[:80]}" if obj._index_error else state

    @admin.display(description="graph")
    def graph_facts(self, obj) -> str:
        url = reverse("admin:rag_relation_changelist") + f"?document_id={obj.pk}"
        return format_html('<a href="{}">relations</a>', url)

    @admin.action(description="Reindex selected documents")
    def reindex(self, request, queryset):
        queue_reindex(request, queryset, f"admin: reindex {queryset.count()} document(s)")


admin.site.unregister(Collection)


@admin.register(Collection)
class IndexedCollectionAdmin(CollectionAdmin):
    actions = ["reindex"]

    @admin.action(description="Reindex documents of selected collections")
    def reindex(self, request, queryset):
        names = ", ".join(c.name for c in queryset[:3])
        queue_reindex(request, Document.objects.filter(collection__in=queryset), f"admin: reindex collections {names}")


admin.site.unregister(Team)


@admin.register(Team)
class IndexedTeamAdmin(TeamAdmin):
    actions = ["reindex", "cleanup"]

    @admin.action(description="Reindex documents of selected teams")
    def reindex(self, request, queryset):
        names = ", ".join(t.name for t in queryset[:3])
        queue_reindex(request, Document.objects.filter(team__in=queryset), f"admin: reindex teams {names}")

    @admin.action(description="Clean up obsolete embeddings (all teams)")
    def cleanup(self, request, queryset):
        report_cleanup(request, cleanup_embeddings())


@admin.register(IndexStatus)
class IndexStatusAdmin(admin.ModelAdmin):
    list_display = ["document", "model_id", "state", "indexed_version", "chunk_count", "attempts", "updated_at", "error"]
    list_filter = ["state", "model_id"]
    search_fields = ["document__title", "error"]
    readonly_fields = [f.name for f in IndexStatus._meta.fields]
    actions = ["reindex"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Reindex the documents of selected statuses")
    def reindex(self, request, queryset):
        queue_reindex(request, Document.objects.filter(pk__in=queryset.values("document_id")), "admin: reindex from statuses")


@admin.register(IndexJob)
class IndexJobAdmin(admin.ModelAdmin):
    list_display = [
        "description",
        "model_id",
        "backfill",
        "state",
        "progress",
        "failed",
        "created_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "backfill", "model_id"]
    readonly_fields = [f.name for f in IndexJob._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="done / total")
    def progress(self, obj) -> str:
        return f"{obj.done + obj.failed} / {obj.total}"


@admin.register(ServingModel)
class ServingModelAdmin(admin.ModelAdmin):
    """Which model each team is searched with; during a model change, how far the configured one has come."""

    list_display = ["team", "model_id", "provider", "dimension", "since", "switch"]
    list_filter = ["model_id"]
    readonly_fields = [f.name for f in ServingModel._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="configured model")
    def switch(self, obj: ServingModel) -> str:
        if obj.model_id == settings.RAG_EMBEDDING_MODEL:
            return "in use"
        progress = coverage(Document.objects.filter(team_id=obj.team_id), old=obj.model_id)
        return (
            f"{progress.model}: backfill {progress.done} / {progress.total} documents"
            + (f", {progress.failed} failed" if progress.failed else "")
            + " (searches switch when all are done)"
        )


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ["document", "chunk_index", "model_id", "document_version", "start_offset", "end_offset"]
    list_filter = ["model_id"]
    search_fields = ["document__title"]
    exclude = ["embedding", "search_vector"]
    readonly_fields = [
        "document",
        "team",
        "chunk_index",
        "chunk_text",
        "document_version",
        "content_hash",
        "model_id",
        "start_offset",
        "end_offset",
        "metadata",
        "doc_length",
        "created_at",
    ]
    actions = ["cleanup"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Clean up obsolete models' and deleted documents' embeddings")
    def cleanup(self, request, queryset):
        report_cleanup(request, cleanup_embeddings())


class FeedbackInline(admin.TabularInline):
    model = Feedback
    extra = 0
    can_delete = False
    readonly_fields = ["user", "rating", "comment", "created_at"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


# A rating at or below this is a low-rated answer (ratings are 1-5).
LOW_RATING = 2


class RatingFilter(admin.SimpleListFilter):
    title = "rating"
    parameter_name = "rating"

    def lookups(self, request, model_admin):
        return [("low", f"Low (≤ {LOW_RATING})"), ("rated", "Rated"), ("unrated", "Not rated")]

    def queryset(self, request, queryset):
        if self.value() == "low":
            return queryset.filter(feedback__rating__lte=LOW_RATING).distinct()
        if self.value() == "rated":
            return queryset.filter(feedback__isnull=False).distinct()
        if self.value() == "unrated":
            return queryset.filter(feedback__isnull=True)
        return queryset


def _short(text: str, length: int = 80) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


@admin.register(QueryLog)
class QueryLogAdmin(admin.ModelAdmin):
    """Answers with their ratings; *Low* under rating lists the low-rated ones, each with the passages it cited."""

    list_display = ["short_query", "user", "mode", "confidence", "cited", "total_ms", "rating", "created_at"]
    list_filter = [RatingFilter, "mode", "confidence", "team"]
    search_fields = ["query", "answer", "user__username"]
    date_hierarchy = "created_at"
    readonly_fields = [*(f.name for f in QueryLog._meta.fields if f.name != "citations"), "cited_passages"]
    exclude = ["citations"]
    inlines = [FeedbackInline]

    @admin.display(description="cited")
    def cited(self, obj) -> str:
        titles = dict.fromkeys(c.get("document", {}).get("title", "?") for c in obj.citations)
        return "; ".join(_short(t, 40) for t in titles) or "–"

    @admin.display(description="citations")
    def cited_passages(self, obj) -> str:
        if not obj.citations:
            return "–"
        return format_html(
            "<ol>{}</ol>",
            format_html_join(
                "",
                '<li value="{}"><a href="{}">{}</a> (v{}, chunk {}, score {}): <q>{}</q></li>',
                (
                    (
                        c.get("n"),
                        c.get("document", {}).get("url", ""),
                        c.get("document", {}).get("title", "?"),
                        c.get("version"),
                        c.get("chunkIndex"),
                        c.get("score"),
                        _short(c.get("context") or "", 300),
                    )
                    for c in obj.citations
                ),
            ),
        )

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user").annotate(_rating=Avg("feedback__rating"))

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="query")
    def short_query(self, obj) -> str:
        return _short(obj.query)

    @admin.display(description="rating", ordering="_rating")
    def rating(self, obj) -> str:
        return f"{obj._rating:.1f}" if obj._rating is not None else "–"


class ResultsFilter(admin.SimpleListFilter):
    title = "results"
    parameter_name = "results"

    def lookups(self, request, model_admin):
        return [("zero", "Zero results"), ("some", "Some results")]

    def queryset(self, request, queryset):
        if self.value() == "zero":
            return queryset.filter(results=0)
        if self.value() == "some":
            return queryset.filter(results__gt=0)
        return queryset


@admin.register(SearchLog)
class SearchLogAdmin(admin.ModelAdmin):
    """Searches: *Zero results* under results lists what found nothing; *Top queries* groups them by text.

    The text is kept only with RAG_LOG_QUERIES; without it every row still has its mode, result count and latency.
    """

    list_display = ["shown_query", "user", "team", "mode", "results", "degraded", "total_ms", "created_at"]
    list_filter = [ResultsFilter, "mode", "degraded", "team"]
    search_fields = ["query", "user__username"]
    date_hierarchy = "created_at"
    list_select_related = ["user", "team"]
    readonly_fields = [f.name for f in SearchLog._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="query")
    def shown_query(self, obj) -> str:
        return _short(obj.query) if obj.query else "(not logged)"

    def get_urls(self):
        top = path("top/", self.admin_site.admin_view(self.top_queries_view), name="rag_searchlog_top")
        return [top, *super().get_urls()]

    def top_queries_view(self, request):
        """The most frequent query texts (case folded) of the last `days` days; `zero=1` keeps those that found nothing."""
        try:
            days = min(max(int(request.GET.get("days", 30)), 1), 3650)
        except ValueError:
            days = 30
        only_zero = request.GET.get("zero") == "1"
        logs = SearchLog.objects.filter(created_at__gte=timezone.now() - timedelta(days=days)).exclude(query="")
        if only_zero:
            logs = logs.filter(results=0)
        rows = (
            logs.annotate(text=Lower("query"))
            .values("text")
            .annotate(
                searches=Count("id"),
                zero=Count("id", filter=Q(results=0)),
                avg_ms=Avg("total_ms"),
                first=Min("created_at"),
                last=Max("created_at"),
            )
            .order_by("-searches", "text")[:100]
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Top zero-result queries" if only_zero else "Top queries",
            "rows": rows,
            "days": days,
            "only_zero": only_zero,
            "logging_queries": settings.RAG_LOG_QUERIES,
            "unlogged": SearchLog.objects.filter(created_at__gte=timezone.now() - timedelta(days=days), query="").count(),
        }
        return TemplateResponse(request, "admin/rag/searchlog/top_queries.html", context)


@admin.register(Entity)
class EntityAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "team", "created_at"]
    list_filter = ["kind", "team"]
    search_fields = ["name", "key"]
    readonly_fields = [f.name for f in Entity._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Relation)
class RelationAdmin(admin.ModelAdmin):
    """The facts read from each document's chunks; `?document_id=<id>` lists one document's."""

    list_display = ["source", "predicate", "target", "confidence", "weight", "document_id", "document_version", "chunk_id"]
    list_filter = ["predicate", "model_id"]
    list_select_related = ["source", "target"]
    search_fields = ["source__name", "target__name", "=document_id"]
    readonly_fields = [f.name for f in Relation._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(GraphExtraction)
class GraphExtractionAdmin(admin.ModelAdmin):
    """The llm graph extractor's cache: deleting rows makes the next indexing of those texts ask the model again."""

    list_display = ["content_hash", "extractor", "entities", "relations", "created_at"]
    list_filter = ["extractor"]
    search_fields = ["=content_hash"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in GraphExtraction._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="entities")
    def entities(self, obj) -> int:
        return len(obj.facts.get("entities", []))

    @admin.display(description="relations")
    def relations(self, obj) -> int:
        return len(obj.facts.get("relations", []))
