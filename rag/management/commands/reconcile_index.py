from __future__ import annotations

from django.core.management.base import BaseCommand

from rag.indexing.reconcile import reconcile
from rag.tasks import repair_index


class Command(BaseCommand):
    help = "Report missing, stale, failed and orphaned chunks for the current model; --fix queues the repairs."

    def add_arguments(self, parser):
        parser.add_argument("--fix", action="store_true")

    def handle(self, *args, fix: bool, **options):
        report = reconcile()
        counts = report.counts()
        self.stdout.write(
            f"Model {report.model_id}: {counts['missing']} missing, {counts['stale']} stale, "
            f"{counts['failed']} failed, {counts['orphaned']} with orphaned chunks, {counts['without_graph']} without graph facts"
        )
        if counts["backfill"]:
            self.stdout.write(
                f"{counts['backfill']} document(s) of teams still searched with an earlier model wait for the backfill "
                "(started by the worker; see rag.status and the admin's Index jobs)."
            )
        if fix:
            queued = repair_index(report)
            self.stdout.write(
                f"Removed the chunks of {len(report.to_remove)} deleted document(s); queued {queued} document(s) for indexing."
            )
        elif any(n for name, n in counts.items() if name != "backfill"):
            self.stdout.write("Run with --fix to repair.")
