from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from rag.indexing.reconcile import milvus_drift, milvus_repair, reconcile
from rag.indexing.vector_outbox import outbox_backlog, outbox_drain
from rag.tasks import repair_index


class Command(BaseCommand):
    help = (
        "Report missing, stale, failed and orphaned chunks for the current model (and, with the milvus backend,"
        " how Milvus's copy differs); --fix queues the repairs."
    )

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
        if settings.RAG_VECTOR_BACKEND == "milvus":
            self._milvus(fix=fix)

    def _milvus(self, *, fix: bool) -> None:
        drift = milvus_drift()
        counts = drift.counts()
        self.stdout.write(
            f"Milvus: {counts['missing']} vector(s) missing, {counts['stale']} stale, {counts['orphaned']} orphaned,"
            f" {counts['collections']} collection(s) no model needs; {outbox_backlog()} chunk write(s) waiting in the outbox"
        )
        if fix:
            queued = milvus_repair(drift)
            self.stdout.write(
                f"Milvus: dropped {counts['collections']} collection(s); copied {outbox_drain()} outbox row(s) ({queued} queued)."
            )
