"""Why one file could not be imported. The message is shown as is, in the job and on the /import page."""

from __future__ import annotations


class FileRejected(Exception):
    """This file fails alone; the rest of the import goes on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def size_text(size: int) -> str:
    """A limit as people read it: 20 MB, or 1,000 bytes."""
    if size < 1024 * 1024:
        return f"{size:,} bytes"
    return f"{size / (1024 * 1024):g} MB"
