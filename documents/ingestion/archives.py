"""ZIP archives expanded within limits: entry count, per-file size, expansion ratio and total size.

Sizes in an archive's headers are claims, not facts: every entry is read through a counting
stream that stops at the limit, so a bomb that lies about its sizes is caught all the same.
Folders become path prefixes (`guides/setup.md`); each entry is imported as its own file.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings

from documents.ingestion.errors import FileRejected, size_text

# Entries below this size never count as bombs, whatever their ratio: a page of spaces compresses 1000x.
RATIO_FLOOR = 1024 * 1024
_READ_CHUNK = 64 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")
# Written by macOS's archiver beside every file; never anyone's document.
_IGNORED_PREFIXES = ("__MACOSX/",)


@dataclass
class Entry:
    path: str
    data: bytes | None = None
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


def expand(data: bytes, *, prefix: str = "") -> Iterator[Entry]:
    """The files of a ZIP archive; entries that break a rule come with an error instead of data.

    Raises FileRejected when the archive as a whole cannot be read or has too many files.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = [i for i in archive.infolist() if not i.is_dir() and not i.filename.startswith(_IGNORED_PREFIXES)]
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise FileRejected(f"Corrupt ZIP file: {exc}.") from exc
    limit = settings.IMPORT_MAX_ARCHIVE_FILES
    if len(infos) > limit:
        raise FileRejected(f"The archive holds {len(infos)} files; at most {limit} are imported from one archive.")
    budget = settings.IMPORT_MAX_EXPANDED_SIZE
    for info in infos:
        shown = f"{prefix}{info.filename}"
        try:
            path = prefix + safe_relative_path(info.filename)
        except FileRejected as exc:
            yield Entry(path=shown, error=exc.reason)
            continue
        try:
            content = _read(archive, info, budget)
        except FileRejected as exc:
            yield Entry(path=path, error=exc.reason)
            continue
        budget -= len(content)
        yield Entry(path=path, data=content)


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    if stat.S_ISLNK(info.external_attr >> 16):
        raise FileRejected("Symbolic links in archives are not followed.")
    if info.flag_bits & 0x1:
        raise FileRejected("The file is encrypted in the archive; archive it without a password.")
    max_file = settings.IMPORT_MAX_FILE_SIZE
    if info.file_size > max_file:
        raise FileRejected(f"The file is larger than the {size_text(max_file)} limit per file.")
    if budget <= 0:
        raise FileRejected(f"The archive expands beyond the {size_text(settings.IMPORT_MAX_EXPANDED_SIZE)} limit in total.")
    max_ratio = settings.IMPORT_MAX_EXPANSION_RATIO
    allowed = min(max_file, budget, max(RATIO_FLOOR, max_ratio * max(info.compress_size, 1)))
    out = io.BytesIO()
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_READ_CHUNK):
                out.write(chunk)
                if out.tell() > allowed:
                    raise FileRejected(_overflow_reason(out.tell(), info, max_file, budget, max_ratio))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as exc:
        raise FileRejected(f"Corrupt archive entry: {exc}.") from exc
    except RuntimeError as exc:  # zipfile's word for an encrypted entry it was not given a password for
        raise FileRejected("The file is encrypted in the archive; archive it without a password.") from exc
    return out.getvalue()


def _overflow_reason(read: int, info: zipfile.ZipInfo, max_file: int, budget: int, max_ratio: int) -> str:
    if read > max_file:
        return f"The file is larger than the {size_text(max_file)} limit per file."
    if read > budget:
        return f"The archive expands beyond the {size_text(settings.IMPORT_MAX_EXPANDED_SIZE)} limit in total."
    return f"The file expands more than {max_ratio} times its compressed size (a ZIP bomb?)."
