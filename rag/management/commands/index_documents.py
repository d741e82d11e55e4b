from __future__ import annotations

import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from documents.models import Document
from rag.indexing.pipeline import IndexResult, index_documents
from rag.indexing.state import job_create, job_record
from rag.models import IndexJob, JobState
from rag.providers.embeddings import reset_provider_cache
from rag.tasks import REINDEX_BATCH, enqueue_reindex


class Command(BaseCommand):
    help = "Index documents (all, or by team / collection / document) for the configured embedding model."

    def add_arguments(self, parser):
        parser.add_argument("--team", help="Team id or name")
        parser.add_argument("--collection", help="Collection id")
        parser.add_argument("--document", action="append", help="Document id (repeatable)")
        parser.add_argument("--force", action="store_true", help="Re-chunk even documents already indexed at their version")
        parser.add_argument("--model", help="Embedding model to index with (default RAG_EMBEDDING_MODEL)")
        parser.add_argument("--queue", action="store_true", help="Send batches to Celery workers instead of indexing here")

    def handle(self, *args, team, collection, document, force, model, queue, **options):
        if queue and settings.CELERY_TASK_ALWAYS_EAGER:
            raise CommandError("--queue needs CELERY_BROKER_URL (no broker is configured).")
        documents = Document.objects.filter(deleted_at__isnull=True)
        try:
            if team:
                documents = documents.filter(team__name=team) if not _is_uuid(team) else documents.filter(team_id=team)
            if collection:
                documents = documents.filter(collection_id=collection)
            if document:
                documents = documents.filter(pk__in=document)
            ids = [str(pk) for pk in documents.order_by("created_at", "id").values_list("pk", flat=True)]
        except Exception as exc:  # a malformed id from the command line
            raise CommandError(f"Bad filter: {exc}") from exc
        if not ids:
            self.stdout.write("No documents match.")
            return
        overrides = {"RAG_EMBEDDING_MODEL": model} if model else {}
        with override_settings(**overrides):
            reset_provider_cache()
            try:
                self._run(ids, force=force, queue=queue)
            finally:
                reset_provider_cache()

    def _run(self, ids: list[str], *, force: bool, queue: bool) -> None:
        model_id = settings.RAG_EMBEDDING_MODEL
        job = job_create(description=f"index_documents ({len(ids)} documents)", total=len(ids), model_id=model_id)
        started = time.monotonic()
        result = IndexResult()
        if queue:
            enqueue_reindex(ids, job=job, force=force)
            self.stdout.write(f"Queued {len(ids)} documents (job {job.pk}).")
            while True:
                job.refresh_from_db()
                self._progress(job.done + job.failed, job.total, job.failed, started)
                if job.state != JobState.RUNNING:
                    break
                time.sleep(1)
        else:
            for start in range(0, len(ids), REINDEX_BATCH):
                batch = ids[start : start + REINDEX_BATCH]
                batch_result = index_documents(document_ids=batch, force=force)
                result.merge(batch_result)
                job_record(job_id=job.pk, done=len(batch) - len(batch_result.failed), failed=len(batch_result.failed))
                job.refresh_from_db()
                self._progress(job.done + job.failed, job.total, job.failed, started)
        sys.stderr.write("\n")
        elapsed = time.monotonic() - started
        job = IndexJob.objects.get(pk=job.pk)
        summary = f"Model {model_id}: {job.done} indexed or up to date, {job.failed} failed, in {elapsed:.1f}s"
        if not queue:
            summary += f" ({len(result.indexed)} reindexed, {len(result.skipped)} unchanged, {result.chunks} chunks, {result.embedded} embedded)"
        self.stdout.write(summary)
        for pk, reason in list(result.failed.items())[:10]:
            self.stdout.write(f"  failed {pk}: {reason}")

    def _progress(self, done: int, total: int, failed: int, started: float) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        rate = done / max(time.monotonic() - started, 1e-6)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents, {failed} failed, {rate:.1f}/s")
        sys.stderr.flush()


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
