from __future__ import annotations

from django.core.management.base import BaseCommand

from rag.indexing.cleanup import cleanup_embeddings


class Command(BaseCommand):
    help = (
        "Delete embeddings of models other than RAG_EMBEDDING_MODEL (and its postings and graph facts), and chunks of "
        "deleted documents. A model some team is still searched with (a backfill is under way) is kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--keep-model", action="append", default=[], help="Also keep this model's embeddings")

    def handle(self, *args, dry_run: bool, keep_model: list[str], **options):
        report = cleanup_embeddings(dry_run=dry_run, keep_models=keep_model)
        verb = "Would delete" if dry_run else "Deleted"
        for model_id, teams in report.still_serving.items():
            self.stdout.write(
                f"Kept model {model_id}: {teams} team(s) are still searched with it until the configured model covers "
                "them (see rag.status backfill, or the admin's Serving models). Run cleanup again after the switch."
            )
        for model_id, count in report.obsolete_models.items():
            self.stdout.write(f"{verb} {count} chunk(s) of obsolete model {model_id}")
        self.stdout.write(f"{verb} {report.orphaned_chunks} chunk(s) of deleted documents")
        if not dry_run:
            self.stdout.write(f"Deleted {report.orphaned_entities} graph entit(ies) no chunk names any more")
