"""What a file is, read from its bytes (magic numbers, ZIP structure, text sniffing); the extension only
chooses between Markdown, source code and plain text, which no content test can tell apart reliably."""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

from charset_normalizer import CharsetMatch, from_bytes
from charset_normalizer.utils import is_multi_byte_encoding

from documents.code import code_language
from documents.ingestion.errors import FileRejected

ARCHIVE = "zip"

# Formats Cairn recognises but does not import: said by name, so the reason is useful.
_KNOWN_BINARY = [
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office (OLE) file; save it as DOCX"),
    (b"\x7fELF", "an executable"),
]
_OOXML_OTHER = {"xl/workbook.xml": "an Excel workbook", "ppt/presentation.xml": "a PowerPoint presentation"}
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
_PDF_START = re.compile(rb"\s*%PDF-")
_HTML_START = re.compile(rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL)
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_HTML_TAG = re.compile(rb"<(p|div|h[1-6]|table|ul|ol|a|span|article|section)\b", re.IGNORECASE)
# C0 controls other than tab, newline, form feed and carriage return: binary data, not text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Detected:
    format: str  # a SourceFormat value, or ARCHIVE
    text: str | None = None  # the decoded text, for text formats


def detect(name: str, data: bytes) -> Detected:
    """The format of `data`; raises FileRejected with the reason when it is empty or of no supported type."""
    # No strip(): each would copy the file, up to IMPORT_MAX_FILE_SIZE.
    if not data or data.isspace():
        raise FileRejected("The file is empty.")
    if _PDF_START.match(data):
        return Detected("pdf")
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return Detected(_zip_kind(data))
    for magic, what in _KNOWN_BINARY:
        if data.startswith(magic):
            raise FileRejected(f"Unsupported file type: {what}.")
    text = decode_text(data)
    if code_language(name) is not None:
        return Detected("code", text)  # before HTML: a .jsx or .tsx file may well open with a tag
    suffix = PurePosixPath(name).suffix.lower()
    if _HTML_START.match(data[:4096]) or (suffix in _HTML_SUFFIXES and _HTML_TAG.search(data[:65536])):
        return Detected("html", text)
    return Detected("markdown" if suffix in _MARKDOWN_SUFFIXES else "text", text)


def _zip_kind(data: bytes) -> str:
    try:
        names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise FileRejected(f"Corrupt ZIP file: {exc}.") from exc
    if "word/document.xml" in names:
        return "docx"
    for member, what in _OOXML_OTHER.items():
        if member in names:
            raise FileRejected(f"Unsupported file type: {what}.")
    return ARCHIVE


def decode_text(data: bytes) -> str:
    """Bytes to text: a BOM or valid UTF-8 first, then the legacy encoding charset-normalizer finds likely
    (Windows-1252 and the other 8-bit ones, Shift-JIS, EUC-JP, GB18030, Big5, EUC-KR)."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return _checked(data.decode(encoding))
            except UnicodeDecodeError as exc:
                raise FileRejected(
                    f"Invalid text encoding: the file starts as {encoding} but byte {exc.start} is not ({exc.reason})."
                ) from exc
    if b"\x00" in data[:8192]:
        raise FileRejected("Unsupported file type: binary data, not text.")
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        not_utf8 = exc
    guess = _legacy(data)
    # Shift-JIS, GB18030, Big5 and EUC-KR: their byte pairs often read as a UTF-8 sequence by chance, and
    # damaged UTF-8 never decodes whole in one of them, so a clean multi-byte reading wins.
    if guess is not None and is_multi_byte_encoding(guess.encoding):
        return _checked(str(guess))
    if _UTF8_SEQUENCE.search(data):
        # UTF-8 text with bytes that are not: damaged, or two encodings pasted together. Guessing would garble it.
        raise FileRejected(
            f"Invalid text encoding: the file is UTF-8 but byte {not_utf8.start} is not ({not_utf8.reason})."
        ) from not_utf8
    if guess is None:
        raise FileRejected("Invalid text encoding: the file is neither UTF-8 nor any encoding that reads as text.")
    return _checked(str(guess))


# A well-formed multi-byte UTF-8 sequence; legacy 8-bit text almost never contains one by chance.
_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
# Among equally plausible guesses, the encodings most text files that are not UTF-8 are in.
_PREFERRED = ("cp1252", "latin_1", "iso8859_15")


def _legacy(data: bytes) -> CharsetMatch | None:
    """charset-normalizer's likeliest reading of `data`; None when none reads as text."""
    # UTF-16 and UTF-32 carry a byte-order mark (read above); a guess of them without one is noise.
    matches = [m for m in from_bytes(data) if not m.encoding.startswith("utf")]
    if not matches:
        return None
    best = min(matches, key=lambda m: m.chaos)
    plausible = [m for m in matches if m.chaos <= best.chaos + 0.01]
    chosen = next((m for name in _PREFERRED for m in plausible if m.encoding == name), best)
    return chosen if chosen.chaos <= 0.2 else None  # a guess that still reads as noise is no better than no guess


def _checked(text: str) -> str:
    if _CONTROL.search(text[:65536]):
        raise FileRejected("Unsupported file type: binary data, not text.")
    return text.replace("\r\n", "\n").replace("\r", "\n")
