"""Parsers: the bytes of one file to the markdown text of a document, its title, and (PDF) a page map.

Each returns `Parsed` or raises `FileRejected` with a reason a person can act on. No parser
downloads anything or runs a model: scanned PDFs are refused ("no extractable text"), not OCRed.
Every format is read within bounds before its library builds anything large: front matter without
YAML aliases, HTML within a depth and an element count, DOCX within an expanded size.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError

from documents.code import code_language, fence_code
from documents.ingestion.archives import check_package
from documents.ingestion.detect import Detected
from documents.ingestion.errors import FileRejected
from documents.tags import normalise_tags, split_tags

if TYPE_CHECKING:  # python-docx is imported when a DOCX is parsed, not with this module
    from docx.document import Document as DocxDocument
    from docx.table import Table
    from docx.text.paragraph import Paragraph

# pypdf reports every oddity of a slightly damaged file on its logger; the job keeps the outcome.
logging.getLogger("pypdf").setLevel(logging.ERROR)

PAGE_SEPARATOR = "\n\n"


@dataclass
class Parsed:
    title: str
    text: str
    # Character offset where each page starts in `text` (PDF only).
    page_map: list[int] = field(default_factory=list)
    # From a Markdown file's front matter (normalised); None when the file names no tags.
    tags: list[str] | None = None

    @property
    def pages(self) -> int:
        return len(self.page_map)


def parse(name: str, data: bytes, detected: Detected) -> Parsed:
    """The document a file becomes; `detected` comes from `detect.detect`."""
    parser = _PARSERS[detected.format]
    try:
        parsed = parser(name, data, detected)
    except RecursionError as exc:  # the libraries walk trees recursively; the limits below keep to their depth
        raise FileRejected("The file is nested too deeply to be read.") from exc
    except MemoryError as exc:
        raise FileRejected("The file needs more memory to be read than the worker has.") from exc
    if not parsed.text.strip():
        raise FileRejected("The file has no text.")
    parsed.title = (parsed.title or _title_from_name(name)).strip()[:500]
    return parsed


def _title_from_name(name: str) -> str:
    return PurePosixPath(name).stem.replace("_", " ").strip() or name


_ATX_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _first_heading(markdown: str) -> str:
    match = _ATX_HEADING.search(markdown)
    return match.group(1) if match else ""


# YAML front matter, as Jekyll, Hugo and Obsidian write it: the file's first line is `---`, and the
# block ends at the next line that is `---` or `...`. (detect.py already made every line end in \n.)
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL | re.MULTILINE)


# Front matter is a few lines of metadata: more than this is not front matter, and YAML's pure-Python
# parser would spend seconds and hundreds of megabytes on a large block.
FRONT_MATTER_MAX_SIZE = 64 * 1024
FRONT_MATTER_MAX_DEPTH = 20
_FRONT_MATTER_WHERE = "The front matter (between the --- lines at the top)"


def parse_markdown(name: str, data: bytes, detected: Detected) -> Parsed:
    text = detected.text or ""
    title, tags = "", None
    match = _FRONT_MATTER.match(text)
    meta = _front_matter(match.group(1)) if match else None
    if meta is not None:
        assert match is not None
        text = text[match.end() :].lstrip("\n")
        title = _front_matter_title(meta.get("title"))
        tags = _front_matter_tags(meta["tags"]) if "tags" in meta else None
    return Parsed(title=title or _first_heading(text), text=text, tags=tags)


class _FrontMatterLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases, and nested at most FRONT_MATTER_MAX_DEPTH levels.

    An alias (`*name`) repeats an anchored value by reference: ten short lines of them make a value
    of billions of elements, which `str()` then spells out in C (the "billion laughs"). Front matter
    never needs one, so the loader refuses it before anything is built.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise FileRejected(f"{_FRONT_MATTER_WHERE} repeats a value with a YAML alias (*name); aliases are not allowed there.")
        self.depth += 1
        try:
            if self.depth > FRONT_MATTER_MAX_DEPTH:
                raise FileRejected(f"{_FRONT_MATTER_WHERE} is nested more than {FRONT_MATTER_MAX_DEPTH} levels deep.")
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        finally:
            self.depth -= 1


def _front_matter(block: str) -> dict | None:
    """The front matter's keys; None when the block is not a mapping (a Markdown rule `---` around plain text)."""
    if len(block) > FRONT_MATTER_MAX_SIZE:
        raise FileRejected(f"{_FRONT_MATTER_WHERE} is longer than {FRONT_MATTER_MAX_SIZE // 1024} KB.")
    try:
        meta = yaml.load(block, Loader=_FrontMatterLoader)  # a SafeLoader, without aliases
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "unreadable"
        raise FileRejected(f"{_FRONT_MATTER_WHERE} is not valid YAML: {problem}.") from exc
    if meta is None:
        return {}
    return meta if isinstance(meta, dict) else None


def _front_matter_title(value: object) -> str:
    """A title is one value: text, or a number or date written bare."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        raise FileRejected("The front matter's title must be text, not a list or a mapping.")
    return str(value).strip()


def _front_matter_tags(value: object) -> list[str]:
    """`tags: [a, b]`, a YAML list, or `tags: a, b`; normalised as every document's tags are."""
    if value is None:
        return []
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value)):
        raise FileRejected("The front matter's tags must be a list of words or one comma-separated string.")
    values = split_tags(value) if isinstance(value, str) else value if isinstance(value, list) else [value]
    try:
        return normalise_tags(str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values)
    except ValidationError as exc:
        raise FileRejected(f"The front matter's tags are not valid: {' '.join(exc.messages)}") from exc


def parse_text(name: str, data: bytes, detected: Detected) -> Parsed:
    return Parsed(title="", text=detected.text or "")


def parse_code(name: str, data: bytes, detected: Detected) -> Parsed:
    """A source file as one fenced code block (documents.code), titled by its file name: `app.py`, not `app`."""
    language = code_language(name) or "text"
    return Parsed(title=PurePosixPath(name).name, text=fence_code(detected.text or "", language))


# Never content: scripts, styles and the page's furniture around the main text.
_HTML_DROP = [
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "canvas",
    "nav",
    "footer",
    "aside",
    "form",
]


# markdownify converts a tree recursively, a few Python frames per level: well below the interpreter's limit.
HTML_MAX_DEPTH = 200
_HTML_SCAN_CHUNK = 64 * 1024


def parse_html(name: str, data: bytes, detected: Detected) -> Parsed:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    _check_html_shape(detected.text or "")
    soup = BeautifulSoup(detected.text or "", "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_HTML_DROP):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    for header in root.find_all("header"):
        if header.find(["h1", "h2"]) is None:  # a site banner, not an article's own heading block
            header.decompose()
    converter = MarkdownConverter(heading_style="ATX", bullets="-", code_language="", strip=["img"], escape_misc=False)
    text = converter.convert_soup(root)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return Parsed(title=title or _first_heading(text), text=text)


def _check_html_shape(text: str) -> None:
    """Refuse HTML nested deeper than HTML_MAX_DEPTH, or with more than IMPORT_MAX_HTML_ELEMENTS elements.

    Counted by lxml's streaming parser (the one BeautifulSoup builds on, so the same tree), which drops each
    element once it has ended: the check costs little memory, BeautifulSoup's tree about 1 KB an element.
    """
    from lxml import etree

    limit = settings.IMPORT_MAX_HTML_ELEMENTS
    parser = etree.HTMLPullParser(events=("start", "end"))
    depth = elements = 0
    for start in range(0, len(text), _HTML_SCAN_CHUNK):
        parser.feed(text[start : start + _HTML_SCAN_CHUNK])
        for event, element in parser.read_events():
            if event == "end":
                depth -= 1
                element.clear()
                continue
            depth += 1
            elements += 1
            if depth > HTML_MAX_DEPTH:
                raise FileRejected(
                    f"The HTML is nested more than {HTML_MAX_DEPTH} elements deep; Cairn reads at most {HTML_MAX_DEPTH}."
                )
            if elements > limit:
                raise FileRejected(f"The HTML has more than {limit:,} elements; Cairn reads at most {limit:,} in one file.")


def parse_pdf(name: str, data: bytes, detected: Detected) -> Parsed:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PdfStreamError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # A PDF with an empty user password (restrictions only) opens; one with a password cannot.
            try:
                if not reader.decrypt(""):
                    raise FileRejected("The PDF is encrypted with a password; remove the password and import it again.")
            except (FileNotDecryptedError, DependencyError, NotImplementedError) as exc:
                raise FileRejected("The PDF is encrypted with a password; remove the password and import it again.") from exc
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = str(reader.metadata.get("/Title") or "") if reader.metadata else ""
    except FileRejected:
        raise
    except (PdfReadError, PdfStreamError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise FileRejected(f"Corrupt PDF: {exc}.") from exc
    if not pages:
        raise FileRejected("Corrupt PDF: it has no pages.")
    if not any(pages):
        raise FileRejected("The PDF has no extractable text (a scanned document needs OCR before it can be imported).")
    text_parts, page_map, offset = [], [], 0
    for page_text in pages:
        page_map.append(offset)
        text_parts.append(page_text)
        offset += len(page_text) + len(PAGE_SEPARATOR)
    text = PAGE_SEPARATOR.join(text_parts)
    first_line = next((line.strip() for page in pages for line in page.splitlines() if line.strip()), "")
    return Parsed(title=title.strip() or first_line[:200], text=text, page_map=page_map)


def parse_docx(name: str, data: bytes, detected: Detected) -> Parsed:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    check_package(data, kind="DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
        title = document.core_properties.title or ""
    except (PackageNotFoundError, KeyError, ValueError, AttributeError) as exc:
        raise FileRejected(f"Corrupt DOCX: {exc}.") from exc
    except Exception as exc:  # lxml's XMLSyntaxError and the zip reader's own errors
        if type(exc).__module__.startswith(("lxml", "zipfile")):
            raise FileRejected(f"Corrupt DOCX: {exc}.") from exc
        raise
    text = "\n\n".join(b for b in blocks if b.strip()) + "\n"
    return Parsed(title=title or _first_heading(text), text=text)


_HEADING_STYLE = re.compile(r"^Heading (\d)$")


def _docx_blocks(document: DocxDocument) -> Iterator[str]:
    """Paragraphs and tables in document order, as markdown blocks (consecutive code lines fenced together)."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    # Paragraph.style looks its style up by scanning every style of the document, each time: one
    # lookup table per document instead (a tenfold speed-up on a style-heavy file).
    names = {style.style_id: style.name for style in document.styles}
    default = next((s.name for s in document.styles if s.type == WD_STYLE_TYPE.PARAGRAPH and s.element.default), "Normal")
    code: list[str] = []
    for block in document.iter_inner_content():
        style = names.get(block._p.style, default) if isinstance(block, Paragraph) else ""
        if isinstance(block, Paragraph) and _is_code(block, style or ""):
            code.append(block.text)
            continue
        if code:
            yield "```\n" + "\n".join(code) + "\n```"
            code = []
        if isinstance(block, Table):
            yield _docx_table(block)
        elif isinstance(block, Paragraph):
            yield _docx_paragraph(block, style or "")
    if code:
        yield "```\n" + "\n".join(code) + "\n```"


def _is_code(paragraph: Paragraph, style: str) -> bool:
    if "code" in style.lower() or style in {"HTML Preformatted", "Plain Text", "Macro Text"}:
        return True
    runs = [r for r in paragraph.runs if r.text.strip()]
    return bool(runs) and all((r.font.name or "").lower() in _MONOSPACE for r in runs)


_MONOSPACE = {"courier new", "courier", "consolas", "menlo", "monaco", "source code pro", "dejavu sans mono", "liberation mono"}


def _docx_paragraph(paragraph: Paragraph, style: str) -> str:
    text = paragraph.text.strip()
    if not text:
        return ""
    if style == "Title":
        return f"# {text}"
    match = _HEADING_STYLE.match(style)
    if match:
        return f"{'#' * min(6, int(match.group(1)))} {text}"
    if style.startswith("List Bullet"):
        return f"- {text}"
    if style.startswith("List Number"):
        return f"1. {text}"
    return text


def _docx_table(table: Table) -> str:
    rows = [[_cell(cell.text) for cell in row.cells] for row in table.rows]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


_PARSERS: dict[str, Callable[[str, bytes, Detected], Parsed]] = {
    "markdown": parse_markdown,
    "text": parse_text,
    "code": parse_code,
    "html": parse_html,
    "pdf": parse_pdf,
    "docx": parse_docx,
}
