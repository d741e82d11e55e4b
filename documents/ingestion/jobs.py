"""Import jobs: files in, documents out, each file alone.

A file whose bytes hash to what its path held last time is skipped before it is even parsed
(so a re-import of an unchanged folder parses and embeds nothing); a changed file becomes a new
version of the same document; a new one a new document. Each file is written in its own
transaction with its source and original, so a file that fails leaves nothing behind, and the
job goes on with the next.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path, PurePosixPath

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.celery import TRANSIENT_ERRORS
from config.errors import StorageUnavailable
from documents import services
from documents.ingestion.archives import ExpansionBudget, Opener, expand
from documents.ingestion.detect import ARCHIVE, detect
from documents.ingestion.errors import FileRejected, size_text
from documents.ingestion.parsers import Parsed, parse
from documents.models import (
    Collection,
    Document,
    ImportFile,
    ImportJob,
    ImportOutcome,
    ImportStage,
    Source,
    import_storage,
    storage_errors,
)
from documents.signals import bulk_changes
from permissions.models import User
from permissions.policy import can_write_document

logger = logging.getLogger("documents.ingestion")

# How often a running job writes its counters, for the /import page and jobs.info.
PROGRESS_INTERVAL = 0.5


@dataclass
class IncomingFile:
    """One file to import: its path (its identity in the collection) and how to read it, or why it cannot be."""

    path: str
    size: int | None = None
    read: Callable[[], bytes] | None = None
    error: str | None = None


@dataclass
class Known:
    """What a path held after the last import: the latest source of a live document."""

    document_id: uuid.UUID
    sha256: str
    archived: bool


Progress = Callable[[ImportJob], None]


@transaction.atomic
def import_job_create(
    *, by: User | None, collection: Collection, origin: str, publish: bool, uploads: Iterable[UploadedFile] = ()
) -> ImportJob:
    """A queued job; uploaded files wait in storage for the worker (parsing never runs in the request)."""
    job = ImportJob(team_id=collection.team_id, collection=collection, created_by=by, origin=origin[:300], publish=publish)
    job.full_clean()
    job.save()
    storage = import_storage()
    staged: list[dict] = []
    try:
        for n, upload in enumerate(uploads):
            name = PurePosixPath((upload.name or f"file-{n}").replace("\\", "/")).name or f"file-{n}"
            # Oversized files are refused by the worker, once it knows whether they are archives (bounded
            # by IMPORT_MAX_REQUEST_SIZE) or documents (IMPORT_MAX_FILE_SIZE).
            staged.append({"name": name, "size": upload.size, "key": storage.save(f"uploads/{job.pk}/{n}", upload)})
    except storage_errors() as exc:
        # The job's row rolls back with this error; the uploads already stored go too, as far as the storage lets.
        logger.exception("the imports storage could not be written: the import is refused")
        for stored in staged:
            with contextlib.suppress(*storage_errors()):
                storage.delete(stored["key"])
        raise StorageUnavailable("The file storage could not be reached, so nothing was imported. Try again later.") from exc
    job.uploads = staged
    job.save(update_fields=["uploads"])
    return job


def uploaded_files(job: ImportJob) -> list[IncomingFile]:
    """The job's uploads, archives listed as their entries; bytes are read from storage as each file's turn comes."""
    storage = import_storage()
    budget = ExpansionBudget()
    files: list[IncomingFile] = []
    for upload in job.uploads:
        name = upload["name"]
        if upload.get("error"):
            files.append(IncomingFile(path=name, size=upload.get("size"), error=upload["error"]))
            continue
        files.extend(_expand_if_archive(name, upload["size"], partial(storage.open, upload["key"], "rb"), budget))
    return files


def folder_files(root: Path, *, glob: str | None = None) -> list[IncomingFile]:
    """Every file under `root` (recursively, sorted), symbolic links refused, archives expanded.

    Hidden files and folders (`.git`) are passed over; a link, to a file or a folder, is reported and
    never followed, so an import cannot reach outside the folder it was given.
    """
    files: list[IncomingFile] = []
    budget = ExpansionBudget()
    for path in _walk(root):
        relative = path.relative_to(root).as_posix()
        if glob and not _matches(relative, glob):
            continue
        if path.is_symlink():
            files.append(IncomingFile(path=relative, error="Symbolic links are not followed."))
            continue
        if not path.is_file():
            continue  # sockets, pipes and the like
        files.extend(_expand_if_archive(relative, path.stat().st_size, _opener(path), budget))
    return files


def _opener(path: Path) -> Opener:
    return lambda: path.open("rb")


def _is_archive(open_file: Opener) -> bool:
    """A ZIP archive to expand, told by its bytes: DOCX (and other Office files) are ZIPs too, imported whole."""
    with open_file() as handle:
        if handle.read(4) not in (b"PK\x03\x04", b"PK\x05\x06"):
            return False
        try:
            with zipfile.ZipFile(handle) as archive:  # reads the central directory only
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return False  # imported as a file, which then fails with its reason
    return not names & {"word/document.xml", "xl/workbook.xml", "ppt/presentation.xml"}


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, folders, names in os.walk(root, followlinks=False):
        here = Path(directory)
        folders[:] = [f for f in folders if not f.startswith(".")]
        # os.walk lists a link to a folder among the folders and does not descend: report it as a file.
        found += [here / f for f in folders if (here / f).is_symlink()]
        found += [here / n for n in names if not n.startswith(".")]
    return sorted(found)


def _matches(relative: str, glob: str) -> bool:
    return fnmatchcase(relative, glob) or fnmatchcase(PurePosixPath(relative).name, glob)


def _too_large() -> str:
    return f"The file is larger than the {size_text(settings.IMPORT_MAX_FILE_SIZE)} limit per file."


def _expand_if_archive(path: str, size: int, open_file: Opener, budget: ExpansionBudget) -> list[IncomingFile]:
    """A ZIP archive's entries (identified as `<archive path>/<entry path>`), or the file itself; nothing is
    inflated or read whole here, each file's bytes are read when the import reaches it."""
    if _is_archive(open_file):
        if size > settings.IMPORT_MAX_REQUEST_SIZE:
            error = f"The archive is larger than {size_text(settings.IMPORT_MAX_REQUEST_SIZE)}."
            return [IncomingFile(path=path, size=size, error=error)]
        try:
            entries = expand(open_file, prefix=f"{path}/", budget=budget)
        except FileRejected as exc:
            return [IncomingFile(path=path, size=size, error=exc.reason)]
        return [IncomingFile(path=e.path, size=e.size, error=e.error, read=e.read) for e in entries]
    if size > settings.IMPORT_MAX_FILE_SIZE:
        return [IncomingFile(path=path, size=size, error=_too_large())]
    return [IncomingFile(path=path, size=size, read=partial(_read_whole, open_file))]


def _read_whole(open_file: Opener) -> bytes:
    limit = settings.IMPORT_MAX_FILE_SIZE
    try:
        with open_file() as handle:
            data = handle.read(limit + 1)  # a file may have grown since it was listed
    except OSError as exc:
        raise FileRejected(f"The file could not be read: {exc.strerror or exc}.") from exc
    if len(data) > limit:
        raise FileRejected(_too_large())
    return data


def known_paths(collection: Collection) -> dict[str, Known]:
    """The latest source of every path in the collection whose document is not deleted."""
    rows = (
        Source.objects.filter(collection=collection, document__deleted_at__isnull=True)
        .order_by("path", "-created_at")
        .distinct("path")
        .values_list("path", "document_id", "sha256", "document__archived_at")
    )
    return {path: Known(document_id=doc, sha256=sha, archived=archived is not None) for path, doc, sha, archived in rows}


def import_job_claim(*, job_id: uuid.UUID | str) -> ImportJob | None:
    """Move a queued job to parsing; None when it is gone, finished, or parsed by a live worker.

    A job left in `parsing` by a worker that died (no heartbeat for IMPORT_LEASE seconds) is claimed
    again, and goes on where it stopped: the files it recorded are not imported twice (`import_job_run`).
    The update is conditional, so of two deliveries of the same task only one runs the job.
    """
    now = timezone.now()
    claimed = (
        ImportJob.objects.filter(pk=job_id)
        .filter(Q(stage=ImportStage.QUEUED) | abandoned_parsing(now - timedelta(seconds=settings.IMPORT_LEASE)))
        .update(stage=ImportStage.PARSING, started_at=Coalesce(F("started_at"), Value(now)), heartbeat_at=now)
    )
    if claimed != 1:
        return None
    return ImportJob.objects.select_related("collection", "created_by").get(pk=job_id)


def abandoned_parsing(cutoff: datetime) -> Q:
    """Jobs left parsing by a worker whose last heartbeat is older than `cutoff`."""
    return Q(stage=ImportStage.PARSING) & (Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))


def import_uploads(*, job_id: uuid.UUID | str) -> ImportJob | None:
    """The worker's side of documents.import: claim the job, expand its uploads, import every file."""
    job = import_job_claim(job_id=job_id)
    if job is None:
        return None
    try:
        files = uploaded_files(job)
    except OSError as exc:
        import_job_fail(job_id=job.pk, reason=f"The uploaded files could not be read: {exc}.")
        return None
    return import_job_run(job=job, files=files)


@bulk_changes()  # an import's documents are indexed from the bulk queue, behind any edit
def import_job_run(
    *,
    job: ImportJob,
    files: list[IncomingFile],
    prune: bool = False,
    glob: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportJob:
    """Import `files` into the job's collection and record each outcome; the job ends in indexing, done or failed.

    A job run again (its worker died) skips the files it already recorded: a created or changed file's
    record is written in the same transaction as the document, so none is imported twice.
    """
    job.files_total, job.files_done, job.files_failed = len(files), 0, 0
    _save_progress(job)
    known = known_paths(job.collection)
    recorded = _recorded(job)
    seen: set[str] = set()
    pending: list[ImportFile] = []
    last_write = time.monotonic()
    for incoming in files:
        seen.add(incoming.path)
        earlier = recorded.get(incoming.path[:1024])
        if earlier:
            outcome = earlier.pop()
        else:
            record = _import_one(job, incoming, known, dry_run=dry_run)
            if record.pk is None:
                pending.append(record)
            outcome = record.outcome
        job.files_done += 1
        job.files_failed += outcome == ImportOutcome.FAILED
        if progress is not None:
            progress(job)
        if time.monotonic() - last_write > PROGRESS_INTERVAL:
            _flush(job, pending)
            last_write = time.monotonic()
    if prune:
        pending.extend(_prune(job, known, seen, glob=glob, dry_run=dry_run))
    _flush(job, pending)
    return _finish(job)


def _recorded(job: ImportJob) -> dict[str, list[str]]:
    """The outcomes this job already recorded, by path (a path uploaded twice has two)."""
    recorded: dict[str, list[str]] = {}
    for path, outcome in job.files.values_list("path", "outcome"):
        recorded.setdefault(path, []).append(outcome)
    return recorded


def _import_one(job: ImportJob, incoming: IncomingFile, known: dict[str, Known], *, dry_run: bool) -> ImportFile:
    record = ImportFile(job=job, path=incoming.path[:1024], size=incoming.size)
    try:
        if incoming.error or incoming.read is None:
            raise FileRejected(incoming.error or "The file could not be read.")
        data = incoming.read()
        record.size = len(data)
        sha256 = hashlib.sha256(data).hexdigest()
        previous = known.get(incoming.path)
        if previous is not None and previous.sha256 == sha256:
            # The common case of a re-import: no parsing, no write, no embedding.
            record.outcome, record.document_id = ImportOutcome.UNCHANGED, previous.document_id
            if previous.archived and not dry_run:
                _unarchive(previous.document_id, job.created_by)  # its file is back (after a --prune)
            return record
        detected = detect(incoming.path, data)
        if detected.format == ARCHIVE:
            raise FileRejected("Archives inside archives are not expanded.")
        record.format = detected.format
        parsed = parse(incoming.path, data, detected)
        if len(parsed.text) > settings.DOCUMENT_MAX_TEXT_LENGTH:
            raise FileRejected(
                f"The text is longer than the {settings.DOCUMENT_MAX_TEXT_LENGTH:,} characters a document may hold."
            )
        if dry_run:
            record.outcome = ImportOutcome.UPDATED if previous else ImportOutcome.CREATED
            return record
        document = _write(job, record, incoming.path, data, sha256, parsed, previous)
        known[incoming.path] = Known(document_id=document.pk, sha256=sha256, archived=False)
    except FileRejected as exc:
        record.outcome, record.error = ImportOutcome.FAILED, exc.reason
    except (SoftTimeLimitExceeded, *TRANSIENT_ERRORS):
        raise  # the job's time is up, or the database is unreachable: not this file's fault
    except Exception as exc:
        # One file's surprise must not end the job: the reason is kept, the trace logged.
        logger.exception("Import of %s in job %s failed", incoming.path, job.pk)
        record.outcome, record.error = ImportOutcome.FAILED, f"Unexpected error while importing this file: {type(exc).__name__}."
    return record


@transaction.atomic
def _write(
    job: ImportJob, record: ImportFile, path: str, data: bytes, sha256: str, parsed: Parsed, previous: Known | None
) -> Document:
    """Create or update the document at `path`, with its source and original, and save its `record` with it."""
    by = job.created_by
    document = None
    if previous is not None:
        document = Document.objects.select_related("collection").filter(pk=previous.document_id, deleted_at__isnull=True).first()
    if document is not None and by is not None and not can_write_document(by, document):
        raise FileRejected("A document imported from this path exists and you may not change it.")
    if document is None:
        document = services.document_create(
            by=by,
            collection=job.collection,
            title=parsed.title,
            text=parsed.text,
            publish=job.publish,
            tags=parsed.tags or [],
        )
        outcome = ImportOutcome.CREATED
    else:
        if document.archived_at is not None:
            document = services.document_unarchive(document=document)
        document = services.document_update(
            document=document,
            by=by,
            title=parsed.title,
            text=parsed.text,
            publish=job.publish,
            # A file that names its tags sets them; one that names none leaves the tags given in Cairn.
            tags=parsed.tags,
        )
        outcome = ImportOutcome.UPDATED
    Source.objects.update_or_create(
        document=document,
        document_version=document.version,
        defaults={
            "team_id": document.team_id,
            "collection_id": document.collection_id,
            "path": path,
            "filename": PurePosixPath(path).name[:255],
            "format": record.format,
            "size": len(data),
            "sha256": sha256,
            "page_map": parsed.page_map,
            "original": _store_original(document.team_id, sha256, data),
            "created_at": timezone.now(),
        },
    )
    record.outcome, record.document = outcome, document
    record.save()
    return document


def _store_original(team_id: uuid.UUID, sha256: str, data: bytes) -> str:
    """The storage name of these bytes, saved once per team (content-addressed)."""
    storage = import_storage()
    name = f"originals/{team_id}/{sha256[:2]}/{sha256}"
    if not storage.exists(name):
        saved = storage.save(name, ContentFile(data))
        if saved != name:  # a concurrent import saved the same bytes first; keep one copy
            storage.delete(saved)
    return name


def _unarchive(document_id: uuid.UUID, by: User | None) -> None:
    document = Document.objects.select_related("collection").filter(pk=document_id).first()
    if document is not None and (by is None or can_write_document(by, document)):
        services.document_unarchive(document=document)


def _prune(job: ImportJob, known: dict[str, Known], seen: set[str], *, glob: str | None, dry_run: bool) -> Iterator[ImportFile]:
    """Archive the documents whose files are gone (within the glob, when one was given)."""
    for path, entry in sorted(known.items()):
        if path in seen or entry.archived or (glob and not _matches(path, glob)):
            continue
        document = Document.objects.filter(pk=entry.document_id, deleted_at__isnull=True, archived_at__isnull=True).first()
        if document is None:
            continue
        if not dry_run:
            services.document_archive(document=document)
        yield ImportFile(job=job, path=path[:1024], outcome=ImportOutcome.ARCHIVED, document=document)


def _flush(job: ImportJob, pending: list[ImportFile]) -> None:
    ImportFile.objects.bulk_create(pending)
    pending.clear()
    _save_progress(job)


def _save_progress(job: ImportJob) -> None:
    ImportJob.objects.filter(pk=job.pk).update(
        files_total=job.files_total, files_done=job.files_done, files_failed=job.files_failed
    )


def _finish(job: ImportJob) -> ImportJob:
    changed = job.files.filter(outcome__in=[ImportOutcome.CREATED, ImportOutcome.UPDATED]).exists()
    if job.files_total and job.files_failed == job.files_total:
        job.stage, job.error = ImportStage.FAILED, "No file could be imported; see each file's reason."
    else:
        job.stage = ImportStage.INDEXING if changed else ImportStage.DONE
    job.finished_at = timezone.now() if job.stage != ImportStage.INDEXING else None
    job.save(update_fields=["stage", "error", "finished_at"])
    _discard_uploads(job)
    return job


def import_job_fail(*, job_id: uuid.UUID | str, reason: str) -> None:
    """The job as a whole could not run (its uploads unreadable, the worker out of time); its uploads are removed."""
    failed = (
        ImportJob.objects.filter(pk=job_id)
        .exclude(stage__in=[ImportStage.DONE, ImportStage.FAILED])
        .update(stage=ImportStage.FAILED, error=reason[:2000], finished_at=timezone.now())
    )
    if failed:
        _discard_uploads(ImportJob.objects.get(pk=job_id))


def _discard_uploads(job: ImportJob) -> None:
    storage = import_storage()
    for upload in job.uploads:
        if upload.get("key") and storage.exists(upload["key"]):
            storage.delete(upload["key"])


# Indexing happens in the rag app, which documents may not import: rag registers how to ask it.
@dataclass(frozen=True)
class IndexProgress:
    """How far the index has come with a job's documents, in passages (chunks) as well as documents."""

    waiting: int  # documents not yet indexed at their current version, nor failed
    chunks_embedded: int  # passages of the documents indexed at their current version
    # Those plus the passages the waiting documents will hold, estimated from their text's length until each is indexed.
    chunks_total: int
    eta_seconds: int | None  # at the rate observed so far; None before a rate is known


IndexProbe = Callable[[list[uuid.UUID]], IndexProgress]
_index_probe: IndexProbe | None = None


def register_index_probe(probe: IndexProbe) -> None:
    """`probe(document_ids)` answers how far the index has come with those documents' current versions."""
    global _index_probe
    _index_probe = probe


def index_progress(document_ids: list[uuid.UUID]) -> IndexProgress | None:
    """How far the index has come with these documents (None without documents or before rag registered its probe)."""
    if _index_probe is None or not document_ids:
        return None
    return _index_probe(document_ids)


def import_job_refresh(job: ImportJob) -> ImportJob:
    """A job in `indexing` becomes `done` once every document it created or changed is indexed (or failed to be).

    While the job parses or indexes, `job.index_progress` says how far the index has come with the documents
    it wrote so far (indexing runs while later files are still parsed); otherwise it is None.
    """
    job.index_progress = None  # type: ignore[attr-defined]  # a reading for jobs.info, no field of the model
    if job.stage not in (ImportStage.PARSING, ImportStage.INDEXING):
        return job
    document_ids = list(
        job.files.filter(outcome__in=[ImportOutcome.CREATED, ImportOutcome.UPDATED], document__isnull=False)
        .filter(Q(document__deleted_at__isnull=True))
        .values_list("document_id", flat=True)
    )
    progress = index_progress(document_ids)
    if job.stage == ImportStage.PARSING:
        job.index_progress = progress  # type: ignore[attr-defined]
    elif progress is not None and progress.waiting:
        job.index_progress = progress  # type: ignore[attr-defined]
    else:
        now = timezone.now()
        ImportJob.objects.filter(pk=job.pk, stage=ImportStage.INDEXING).update(stage=ImportStage.DONE, finished_at=now)
        job.stage, job.finished_at = ImportStage.DONE, now
    return job
