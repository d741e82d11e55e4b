from __future__ import annotations

import sys
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from documents.models import Document
from rag.indexing.backfill import backfill_start, backfill_step
from rag.indexing.jobs import job_create, job_record
from rag.indexing.model_switch import switch_covered_teams, teams_behind
from rag.indexing.pipeline import IndexResult, index_documents, reread_graph_facts
from rag.models import IndexJob, JobState
from rag.providers.base import EmbeddingProvider
from rag.providers.embeddings import get_embedding_provider
from rag.tasks import REINDEX_BATCH, enqueue_reindex, start_backfill


class Command(BaseCommand):
    help = (
        "Index documents (all, or by team / collection / document) for the configured embedding model. After a model "
        "change, a run over all documents is the backfill: teams keep being searched with their earlier model until "
        "the configured one covers them, then switch."
    )

    def add_arguments(self, parser):
        parser.add_argument("--team", help="Team id or name")
        parser.add_argument("--collection", help="Collection id")
        parser.add_argument("--document", action="append", help="Document id (repeatable)")
        parser.add_argument("--force", action="store_true", help="Re-chunk even documents already indexed at their version")
        parser.add_argument(
            "--model",
            help="Index with this model instead, beside the configured one (searches do not use it until it is configured)",
        )
        parser.add_argument("--queue", action="store_true", help="Send batches to Celery workers instead of indexing here")
        parser.add_argument(
            "--graph",
            action="store_true",
            help="Only read the knowledge graph's facts again from the chunks already indexed (no embedding): after an "
            "upgrade that changes how facts are read (see docs/operations.md, Upgrading)",
        )
        parser.add_argument(
            "--switch-now",
            action="store_true",
            help="Afterwards, move every team to the configured model even if it does not cover all their documents yet",
        )

    def handle(self, *args, team, collection, document, force, model, queue, graph, switch_now, **options):
        if graph and (force or model or queue or switch_now):
            raise CommandError(
                "--graph reads facts from the chunks already indexed: it takes only --team, --collection, --document."
            )
        if graph and not settings.RAG_GRAPH_ENABLED:
            raise CommandError("The knowledge graph is off (RAG_GRAPH_ENABLED=false): there are no facts to read.")
        if queue and settings.CELERY_TASK_ALWAYS_EAGER:
            raise CommandError("--queue needs CELERY_BROKER_URL (no broker is configured).")
        if model and model != settings.RAG_EMBEDDING_MODEL and (queue or switch_now):
            raise CommandError("--model indexes here, beside the configured model: workers and switches use the configured one.")
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
        if graph:
            self._reread_graph(ids)
            return
        behind = teams_behind() if not model else {}
        if behind and not (team or collection or document):
            self._backfill(queue=queue)
        if not ids:
            self.stdout.write("No documents match.")
        else:
            provider = get_embedding_provider(model_id=model) if model else None
            self._run(ids, force=force, queue=queue, provider=provider)
        if not model:
            self._switch(force=switch_now)

    def _reread_graph(self, ids: list[str]) -> None:
        started = time.monotonic()
        read = 0
        for i, pk in enumerate(ids, start=1):
            read += reread_graph_facts(uuid.UUID(pk))
            if i % 50 == 0 or i == len(ids):
                self._progress(i, len(ids), 0, started)
        if ids:
            sys.stderr.write("\n")
        self.stdout.write(f"Read the graph facts of {read} document(s) again, in {time.monotonic() - started:.1f}s.")

    def _backfill(self, *, queue: bool) -> None:
        """Teams still searched with an earlier model: build the configured model's chunks for them first, as a backfill job."""
        waiting = teams_behind()
        models = ", ".join(sorted({m.model_id for m in waiting.values()}))
        if queue:
            job = start_backfill()
            if job is not None:
                self.stdout.write(
                    f"{len(waiting)} team(s) are searched with {models} until {job.model_id} covers them: the workers "
                    f"run backfill job {job.pk} (progress in rag.status and the admin's Index jobs)."
                )
            return
        start = backfill_start()
        if start is None:
            return
        job = start.job
        self.stdout.write(
            f"{len(waiting)} team(s) are searched with {models} until {job.model_id} covers them: backfill job {job.pk}."
        )
        started = time.monotonic()
        while backfill_step(job_id=job.pk):
            job.refresh_from_db()
            self._progress(job.done + job.failed, job.total, job.failed, started)
        job.refresh_from_db()
        self._progress(job.done + job.failed, job.total, job.failed, started)
        sys.stderr.write("\n")
        self.stdout.write(f"Backfill of {job.model_id}: {job.done} document(s) indexed, {job.failed} failed.")

    def _switch(self, *, force: bool) -> None:
        switched = switch_covered_teams(force=force)
        if switched:
            self.stdout.write(f"{len(switched)} team(s) now searched with {settings.RAG_EMBEDDING_MODEL}.")
        waiting = teams_behind()
        if waiting:
            models = ", ".join(sorted({m.model_id for m in waiting.values()}))
            self.stdout.write(
                f"{len(waiting)} team(s) still searched with {models}: {settings.RAG_EMBEDDING_MODEL} does not cover all "
                "their documents yet (failed or still indexing; see rag.status). --switch-now moves them anyway."
            )

    def _run(self, ids: list[str], *, force: bool, queue: bool, provider: EmbeddingProvider | None) -> None:
        model_id = provider.model_id if provider else settings.RAG_EMBEDDING_MODEL
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
                batch_result = index_documents(document_ids=batch, force=force, provider=provider)
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
        """One line redrawn in place on a terminal; in a log (not a terminal), a line at each tenth of the way."""
        width = 30
        filled = int(width * min(done, total) / max(total, 1))
        rate = done / max(time.monotonic() - started, 1e-6)
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents, {failed} failed, {rate:.1f}/s"
        if sys.stderr.isatty():
            sys.stderr.write("\r" + line)
        else:
            tenth = 10 * min(done, total) // max(total, 1)
            if tenth == getattr(self, "_logged_tenth", -1):
                return
            self._logged_tenth = tenth
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
