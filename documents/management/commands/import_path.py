"""Import a folder (recursively) into a collection: unchanged files skipped, changed ones a new version."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from io import TextIOBase
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from documents.ingestion.jobs import folder_files, import_job_create, import_job_run
from documents.models import Collection, ImportJob, ImportOutcome
from permissions.models import User
from permissions.policy import can_write_collection


class ProgressBar:
    """One line redrawn in place on a terminal (at most ten times a second); nothing when output is not a terminal."""

    def __init__(self, stream: TextIOBase, total: int, enabled: bool) -> None:
        self.stream, self.total, self.enabled = stream, total, enabled
        self.last = 0.0

    def __call__(self, job: ImportJob) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.1 and job.files_done < self.total):
            return
        self.last = now
        width = 30
        filled = int(width * job.files_done / max(1, self.total))
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {job.files_done}/{self.total} files, {job.files_failed} failed"
        )
        self.stream.flush()
        if job.files_done >= self.total:
            self.stream.write("\n")


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--collection", required=True, help="id of the collection to import into")
        parser.add_argument("--glob", help="only files whose path (or name) matches, e.g. '*.md' or 'guides/*'")
        parser.add_argument("--prune", action="store_true", help="archive documents whose files are gone")
        parser.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
        parser.add_argument("--user", help="username the documents are created by (needs write access to the collection)")
        parser.add_argument("--draft", action="store_true", help="keep new documents as drafts (needs --user)")

    def handle(
        self, *args: Any, directory: Path, collection: str, glob: str | None, prune: bool, dry_run: bool, **options: Any
    ) -> None:
        root = directory.expanduser().resolve()
        if not root.is_dir():
            raise CommandError(f"{directory} is not a directory")
        try:
            target = Collection.objects.get(pk=collection)
        except (Collection.DoesNotExist, ValidationError) as exc:
            raise CommandError(f"No collection with id {collection}") from exc
        user = self._user(options["user"], target)
        if options["draft"] and user is None:
            raise CommandError("--draft needs --user: a draft is visible to its author only")
        files = folder_files(root, glob=glob)
        bar = ProgressBar(self.stdout, len(files), enabled=sys.stdout.isatty() and options["verbosity"] > 0)
        # A dry run works on a job like any other, then rolls it back: nothing stays, not even the job. A real
        # run commits file by file, so jobs.info and the indexer see its progress.
        with transaction.atomic() if dry_run else nullcontext():
            job = import_job_create(by=user, collection=target, origin=str(root), publish=not options["draft"])
            job = import_job_run(job=job, files=files, prune=prune, glob=glob, dry_run=dry_run, progress=bar)
            self._report(job, dry_run=dry_run)
            if dry_run:
                transaction.set_rollback(True)

    def _user(self, username: str | None, collection: Collection) -> User | None:
        if username is None:
            return None
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}")
        if not can_write_collection(user, collection):
            raise CommandError(f"{username} may not add documents to {collection.name}")
        return user

    def _report(self, job: ImportJob, *, dry_run: bool) -> None:
        counts = {o: job.files.filter(outcome=o).count() for o in ImportOutcome.values}
        verb = "would be" if dry_run else "were"
        self.stdout.write(
            f"{job.files_total} files: {counts['created']} created, {counts['updated']} updated, "
            f"{counts['unchanged']} unchanged, {counts['failed']} failed; {counts['archived']} documents {verb} archived. "
            f"Job {job.pk} ({job.stage})."
        )
        for failed in job.files.filter(outcome=ImportOutcome.FAILED).order_by("path"):
            self.stderr.write(f"  {failed.path}: {failed.error}")
