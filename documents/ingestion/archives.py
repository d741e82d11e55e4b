"""ZIP files read within limits: archives expanded entry by entry, and ZIP-based documents (DOCX) checked
before a library inflates them.

An archive is listed from its central directory, with nothing inflated; an entry is inflated when the
import reaches it, so a job holds one file's bytes at a time however many archives it was given. What
the archives of one job expand to together is bounded (`ExpansionBudget`), and so is each entry: its
size, and its expansion ratio.

Sizes in a ZIP's headers are claims, not facts: every entry is read through a counting stream that
stops at its limit, so a bomb that lies about its sizes is caught all the same.
Folders become path prefixes (`guides/setup.md`); each entry is imported as its own file.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from django.conf import settings

from documents.ingestion.errors import FileRejected, size_text

# Below this many bytes an entry is never a bomb, whatever its ratio: a page of spaces compresses 1000x.
RATIO_FLOOR = 64 * 1024
_READ_CHUNK = 64 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")
# Written by macOS's archiver beside every file; never anyone's document.
_IGNORED_PREFIXES = ("__MACOSX/",)
# What zipfile raises for a damaged entry (RuntimeError: an encrypted one, handled apart).
_ENTRY_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, ValueError)

Opener = Callable[[], IO[bytes]]


class ExpansionBudget:
    """The bytes the archives of one import job may still expand to, together (IMPORT_MAX_EXPANDED_SIZE)."""

    def __init__(self) -> None:
        self.total = settings.IMPORT_MAX_EXPANDED_SIZE
        self.left = self.total


@dataclass
class Entry:
    path: str
    size: int | None = None  # as the archive declares it
    read: Callable[[], bytes] | None = None  # inflates the entry, or raises FileRejected
    error: str | None = None


def safe_relative_path(name: str) -> str:
    """`name` as a clean relative POSIX path; raises FileRejected for absolute paths and `..`."""
    unified = name.replace("\\", "/")
    if unified.startswith("/") or _DRIVE.match(unified):
        raise FileRejected("Unsafe path in the archive: absolute paths are not allowed.")
    parts = [p for p in unified.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileRejected("Unsafe path in the archive: '..' would leave the archive's folder.")
    if not parts:
        raise FileRejected("Unsafe path in the archive: the name is empty.")
    return str(PurePosixPath(*parts))


def expand(open_archive: Opener, *, prefix: str = "", budget: ExpansionBudget | None = None) -> list[Entry]:
    """The files of a ZIP archive, from its central directory; each readable entry is inflated by its `read`.

    Entries that break a rule come with an error instead. `budget` is shared by the archives of one job.
    Raises FileRejected when the archive as a whole cannot be read or has too many files.
    """
    try:
        with open_archive() as handle, zipfile.ZipFile(handle) as archive:
            infos = [i for i in archive.infolist() if not i.is_dir() and not i.filename.startswith(_IGNORED_PREFIXES)]
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise FileRejected(f"Corrupt ZIP file: {exc}.") from exc
    limit = settings.IMPORT_MAX_ARCHIVE_FILES
    if len(infos) > limit:
        raise FileRejected(f"The archive holds {len(infos)} files; at most {limit} are imported from one archive.")
    reader = _ArchiveReader(open_archive, budget or ExpansionBudget())
    entries = []
    for info in infos:
        path = prefix + info.filename
        try:
            path = prefix + safe_relative_path(info.filename)
            _check_entry(info)
        except FileRejected as exc:
            entries.append(Entry(path=path, size=info.file_size, error=exc.reason))
            continue
        entries.append(Entry(path=path, size=info.file_size, read=reader.entry(info)))
    reader.pending = sum(1 for e in entries if e.read is not None)
    return entries


def _check_entry(info: zipfile.ZipInfo) -> None:
    """The rules an entry's header alone decides."""
    if stat.S_ISLNK(info.external_attr >> 16):
        raise FileRejected("Symbolic links in archives are not followed.")
    if info.flag_bits & 0x1:
        raise FileRejected("The file is encrypted in the archive; archive it without a password.")
    if info.file_size > settings.IMPORT_MAX_FILE_SIZE:
        raise FileRejected(_too_large())


class _ArchiveReader:
    """Reads the entries of one archive, in any order, from one open ZipFile: opened at the first read and
    closed after the last (parsing the central directory again for each entry would cost seconds per
    thousand entries)."""

    def __init__(self, open_archive: Opener, budget: ExpansionBudget) -> None:
        self.open_archive = open_archive
        self.budget = budget
        self.pending = 0
        self.handle: IO[bytes] | None = None
        self.archive: zipfile.ZipFile | None = None

    def entry(self, info: zipfile.ZipInfo) -> Callable[[], bytes]:
        return lambda: self.read(info)

    def read(self, info: zipfile.ZipInfo) -> bytes:
        try:
            return _read_entry(self._open(), info, self.budget)
        finally:
            self.pending -= 1
            if self.pending <= 0:
                self.close()

    def _open(self) -> zipfile.ZipFile:
        if self.archive is None:
            try:
                self.handle = self.open_archive()
                self.archive = zipfile.ZipFile(self.handle)
            except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
                self.close()
                raise FileRejected(f"The archive could not be read again: {exc}.") from exc
        return self.archive

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()
        if self.handle is not None:
            self.handle.close()
        self.archive = self.handle = None


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: ExpansionBudget) -> bytes:
    left = budget.left
    if left <= 0:
        raise FileRejected(_beyond_budget(budget))
    max_file, max_ratio = settings.IMPORT_MAX_FILE_SIZE, settings.IMPORT_MAX_EXPANSION_RATIO
    allowed = min(max_file, left, max(RATIO_FLOOR, max_ratio * info.compress_size))
    out = io.BytesIO()
    try:
        size = _inflate(archive, info, allowed, out)
    except _ENTRY_ERRORS as exc:
        raise FileRejected(f"Corrupt archive entry: {exc}.") from exc
    except RuntimeError as exc:  # zipfile's word for an encrypted entry it was not given a password for
        raise FileRejected("The file is encrypted in the archive; archive it without a password.") from exc
    finally:
        # Every byte inflated counts, refused or not: the budget bounds the job's work, not only what it keeps.
        budget.left -= out.tell()
    if size is not None:
        return out.getvalue()
    if allowed == max_file:
        raise FileRejected(_too_large())
    if allowed == left:
        raise FileRejected(_beyond_budget(budget))
    raise FileRejected(f"The file expands more than {max_ratio} times its compressed size (a ZIP bomb?).")


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, allowed: int, out: IO[bytes] | None) -> int | None:
    """Inflate one entry into `out` (or nowhere), stopping as soon as it passes `allowed` bytes.

    Its size, or None once it passed `allowed` (`out` then holds the bytes read so far).
    """
    size = 0
    with archive.open(info) as stream:
        while chunk := stream.read(_READ_CHUNK):
            size += len(chunk)
            if out is not None:
                out.write(chunk)
            if size > allowed:
                return None
    return size


def _too_large() -> str:
    return f"The file is larger than the {size_text(settings.IMPORT_MAX_FILE_SIZE)} limit per file."


def _beyond_budget(budget: ExpansionBudget) -> str:
    return f"The archives of this import expand beyond the {size_text(budget.total)} limit in total."


def check_package(data: bytes, *, kind: str) -> None:
    """Refuse a ZIP-based document (`kind`: "DOCX") whose parts expand too far, before its library reads them.

    python-docx inflates every part whole and parses its XML, with no limit of its own: a 100 KB file
    can hold gigabytes. The parts may expand to IMPORT_MAX_DOCX_EXPANDED_SIZE together, and to at most
    IMPORT_MAX_EXPANSION_RATIO times the file's size. The sizes the central directory declares are
    checked first; then every part is inflated, counted and dropped, since headers can lie.
    """
    limit, max_ratio = settings.IMPORT_MAX_DOCX_EXPANDED_SIZE, settings.IMPORT_MAX_EXPANSION_RATIO
    allowed = min(limit, max(RATIO_FLOOR, max_ratio * len(data)))

    def refused() -> FileRejected:
        if allowed == limit:
            return FileRejected(f"The {kind} expands beyond the {size_text(limit)} limit for one {kind} (its parts together).")
        return FileRejected(f"The {kind} expands more than {max_ratio} times its size (a ZIP bomb?).")

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            infos = package.infolist()
            if sum(i.file_size for i in infos) > allowed:
                raise refused()
            expanded = 0
            for info in infos:
                size = _inflate(package, info, allowed - expanded, None)
                if size is None:
                    raise refused()
                expanded += size
    except _ENTRY_ERRORS as exc:
        raise FileRejected(f"Corrupt {kind}: {exc}.") from exc
    except RuntimeError as exc:
        raise FileRejected(f"Corrupt {kind}: a part is encrypted.") from exc
