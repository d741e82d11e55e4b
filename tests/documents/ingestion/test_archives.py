"""ZIP archives: folders become path prefixes; unsafe names, links, bombs and oversized entries fail alone."""

from __future__ import annotations

import io
import zipfile

import pytest
from pytest_django import Settings

from documents.ingestion.archives import Entry, ExpansionBudget, expand
from documents.ingestion.errors import FileRejected
from tests.documents.ingestion.files import make_zip, make_zip_with_encrypted_entry, make_zip_with_symlink


def listed(data: bytes, *, budget: ExpansionBudget | None = None) -> list[Entry]:
    return expand(lambda: io.BytesIO(data), prefix="docs.zip/", budget=budget)


def failure(entry: Entry) -> str | None:
    """Why the entry failed, when it was listed or when it was read; None when it was read."""
    if entry.error or entry.read is None:
        return entry.error
    try:
        entry.read()
    except FileRejected as exc:
        return exc.reason
    return None


def entries(data: bytes, *, budget: ExpansionBudget | None = None) -> dict[str, str | None]:
    """Each entry's path and its error (None when it was read), read in order as an import does."""
    return {e.path: failure(e) for e in listed(data, budget=budget)}


def test_folders_inside_an_archive_become_path_prefixes() -> None:
    archive = make_zip({"guides/setup.md": b"# Setup", "README.md": b"# Readme", "guides/": b""})
    assert {e.path: e.read() for e in listed(archive) if e.read} == {
        "docs.zip/guides/setup.md": b"# Setup",
        "docs.zip/README.md": b"# Readme",
    }


def test_a_name_that_climbs_out_of_the_archive_is_refused_and_the_rest_is_read() -> None:
    result = entries(make_zip({"../../etc/cron.d/evil.md": b"x", "ok.md": b"# ok"}))
    assert result["docs.zip/../../etc/cron.d/evil.md"] == "Unsafe path in the archive: '..' would leave the archive's folder."
    assert result["docs.zip/ok.md"] is None


@pytest.mark.parametrize("name", ["/etc/passwd.md", "C:\\Windows\\evil.md", "\\\\server\\share.md"])
def test_an_absolute_name_is_refused(name: str) -> None:
    (error,) = entries(make_zip({name: b"x"})).values()
    assert error == "Unsafe path in the archive: absolute paths are not allowed."


def test_a_symbolic_link_in_an_archive_is_not_followed() -> None:
    (error,) = entries(make_zip_with_symlink("passwd.md", "/etc/passwd")).values()
    assert error == "Symbolic links in archives are not followed."


def test_an_encrypted_entry_is_refused() -> None:
    (error,) = entries(make_zip_with_encrypted_entry("secret.md", b"# hidden")).values()
    assert error == "The file is encrypted in the archive; archive it without a password."


def test_an_entry_that_expands_too_many_times_is_a_bomb(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANSION_RATIO = 100
    result = entries(make_zip({"bomb.txt": b"0" * (4 * 1024 * 1024), "ok.md": b"# fine"}))
    assert result["docs.zip/bomb.txt"] == "The file expands more than 100 times its compressed size (a ZIP bomb?)."
    assert result["docs.zip/ok.md"] is None


def test_a_bomb_that_lies_about_its_size_in_the_header_is_caught_while_reading(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANSION_RATIO = 100
    archive = bytearray(make_zip({"bomb.txt": b"0" * (4 * 1024 * 1024)}))
    # Patch the declared uncompressed size (local header and central directory) down to 10 bytes.
    real = (4 * 1024 * 1024).to_bytes(4, "little")
    archive = bytearray(bytes(archive).replace(real, (10).to_bytes(4, "little")))
    (error,) = entries(bytes(archive)).values()
    assert error is not None and ("ZIP bomb" in error or "Corrupt archive entry" in error)


def test_an_entry_over_the_file_size_limit_is_refused(settings: Settings) -> None:
    settings.IMPORT_MAX_FILE_SIZE = 1000
    result = entries(make_zip({"big.md": b"x" * 2000, "small.md": b"y" * 10}, compression=zipfile.ZIP_STORED))
    assert result == {"docs.zip/big.md": "The file is larger than the 1,000 bytes limit per file.", "docs.zip/small.md": None}


def test_the_total_expanded_size_is_bounded(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANDED_SIZE = 3000
    archive = make_zip({f"{n}.md": b"z" * 1000 for n in range(5)}, compression=zipfile.ZIP_STORED)
    result = entries(archive)
    assert [result[f"docs.zip/{n}.md"] is None for n in range(5)] == [True, True, True, False, False]
    assert result["docs.zip/4.md"] == "The archives of this import expand beyond the 3,000 bytes limit in total."


def test_the_archives_of_one_job_share_one_budget(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANDED_SIZE = 3000
    budget = ExpansionBudget()
    archive = make_zip({f"{n}.md": b"z" * 1000 for n in range(2)}, compression=zipfile.ZIP_STORED)
    first, second = entries(archive, budget=budget), entries(archive, budget=budget)
    assert list(first.values()) == [None, None]
    assert list(second.values()) == [None, "The archives of this import expand beyond the 3,000 bytes limit in total."]


def test_an_entry_under_a_megabyte_is_checked_for_its_ratio_too(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANSION_RATIO = 100
    result = entries(make_zip({"small-bomb.txt": b"0" * (1024 * 1024 - 1), "page.md": b" " * 60_000}))
    assert result == {
        "docs.zip/small-bomb.txt": "The file expands more than 100 times its compressed size (a ZIP bomb?).",
        "docs.zip/page.md": None,  # below the 64 KB floor: a page of spaces may compress 1000 times
    }


def test_nothing_is_inflated_until_an_entry_is_read(settings: Settings) -> None:
    settings.IMPORT_MAX_EXPANDED_SIZE = 1000
    budget = ExpansionBudget()
    archive = make_zip({"a.md": b"a" * 800, "b.md": b"b" * 800}, compression=zipfile.ZIP_STORED)
    first, second = listed(archive, budget=budget)
    assert (budget.left, first.size, second.size) == (1000, 800, 800)
    assert second.read is not None and second.read() == b"b" * 800
    assert failure(first) == "The archives of this import expand beyond the 1,000 bytes limit in total."


def test_an_archive_with_too_many_files_is_refused_whole(settings: Settings) -> None:
    settings.IMPORT_MAX_ARCHIVE_FILES = 3
    with pytest.raises(FileRejected, match="holds 4 files; at most 3"):
        listed(make_zip({f"{n}.md": b"x" for n in range(4)}))


def test_a_corrupt_archive_is_refused_whole() -> None:
    with pytest.raises(FileRejected, match="Corrupt ZIP"):
        listed(b"PK\x03\x04" + b"\x00" * 40)
