"""Exports people already have, pointed at as a folder on the server or uploaded as a ZIP, re-read as a sync.

Flavours say how an export's files become documents:
- `files`: every file as it is (the parsers decide format and title);
- `obsidian`: a vault's notes, titled by their note name; `[[Note]]`, `[[folder/Note#Heading|alias]]` become
  `[[Note]]` / `[[Note|alias]]` wiki links, which the document page links and the graph reads as edges;
- `notion`: a Markdown export, the 32-hex ids Notion appends to every name stripped from titles, and its
  relative links between pages rewritten as wiki links to the target's title;
- `confluence`: a space's HTML export, each page titled by its own title (the space name dropped), its
  breadcrumbs, header, metadata, attachments list and footer left out, links between pages made wiki links.

An item's version is its content's SHA-256 for a folder (read again only when the file's size or
modification time moved) and the entry's CRC-32 and size for a ZIP (read from the central directory):
an unchanged export costs no parse, and a ZIP no inflating.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from django.conf import settings

from connectors.base import ConfigField, ItemError, PreviousItem, SourceError, SourceItem
from documents.ingestion.archives import ExpansionBudget, expand
from documents.ingestion.detect import decode_text
from documents.ingestion.errors import FileRejected, size_text
from documents.models import import_storage, storage_errors

FLAVOURS = ("files", "obsidian", "notion", "confluence")
_DOCUMENT_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx", ".txt", ".text", ".html", ".htm", ".pdf", ".docx"}
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
_NOTION_ID = re.compile(r"\s+[0-9a-f]{32}(?=$|\.)")
_WIKI_LINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MARKDOWN_LINK = re.compile(r"(?<!!)\[([^\[\]\n]*)\]\(([^()\s]+(?:\([^()\s]*\))?)\)")


@dataclass
class Entry:
    """A file of the export: its path (the item's key), size, a cheap fingerprint, and how to read it."""

    path: str
    size: int | None
    stamp: str
    read: Callable[[], bytes] | None = None
    error: str | None = None


@dataclass
class _Page:
    entry: Entry
    version: str
    title: str | None
    state: dict[str, Any] = field(default_factory=dict)


def _too_large() -> str:
    return f"The file is larger than the {size_text(settings.IMPORT_MAX_FILE_SIZE)} limit per file."


class _Export(ABC):
    """What the folder and the ZIP share: the flavour's choice of files, titles and link rewriting."""

    kind: ClassVar[str]
    label: ClassVar[str]
    fields: ClassVar[tuple[ConfigField, ...]]
    secret_fields: ClassVar[tuple[ConfigField, ...]] = ()

    def __init__(self, flavour: str) -> None:
        self.flavour = flavour
        self._cursor = ""

    @property
    def cursor(self) -> str:
        return self._cursor

    @abstractmethod
    def _entries(self) -> list[Entry]: ...

    @abstractmethod
    def _origin(self, path: str) -> str: ...

    def _takes(self, path: str) -> bool:
        suffix = PurePosixPath(path).suffix.lower()
        if self.flavour == "files":
            return True
        if self.flavour == "confluence":
            # The space's index.html is the export's table of contents, not a page.
            return suffix in {".html", ".htm"} and path != "index.html"
        return suffix in _DOCUMENT_SUFFIXES

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        pages = [self._page(entry, previous.get(entry.path)) for entry in self._entries() if self._takes(entry.path)]
        targets = self._link_targets(pages)
        digest = hashlib.sha256()
        for page in pages:
            digest.update(f"{page.entry.path}\0{page.version}\n".encode())
            entry = page.entry
            yield SourceItem(
                key=entry.path,
                name=PurePosixPath(entry.path).name,
                version=page.version,
                origin=self._origin(entry.path),
                fetch=partial(self._fetch, entry, targets),
                title=page.title,
                size=entry.size,
                links=tuple(sorted(page.state.get("links", ()))),
                state=page.state,
            )
        self._cursor = f"{len(pages)} files, {digest.hexdigest()[:12]}"

    def _page(self, entry: Entry, previous: PreviousItem | None) -> _Page:
        """The entry's version and title, reusing the last sync's when its fingerprint is unchanged."""
        if entry.error is not None or entry.read is None:
            return _Page(entry, version=f"error:{entry.stamp}", title=self._name_title(entry.path))
        if previous is not None and previous.state.get("stamp") == entry.stamp:
            return _Page(entry, previous.version, previous.state.get("title"), dict(previous.state))
        state: dict[str, Any] = {"stamp": entry.stamp}
        version = entry.stamp
        title = self._name_title(entry.path)
        needs_bytes = entry.stamp.startswith("stat:") or self.flavour == "confluence"
        if needs_bytes and (entry.size or 0) <= settings.IMPORT_MAX_FILE_SIZE:
            try:
                data = entry.read()
            except (FileRejected, ItemError):
                data = None  # the fetch reports it
            if data is not None:
                if entry.stamp.startswith("stat:"):
                    version = "sha256:" + hashlib.sha256(data).hexdigest()
                if self.flavour == "confluence":
                    title = _confluence_title(data) or title
        state["title"] = title
        return _Page(entry, version, title, state)

    def _name_title(self, path: str) -> str | None:
        stem = PurePosixPath(path).stem
        if self.flavour == "obsidian":
            return stem
        if self.flavour == "notion":
            return _NOTION_ID.sub("", stem).strip() or stem
        if self.flavour == "confluence":
            return re.sub(r"_\d+$", "", stem).replace("-", " ").strip() or stem
        return None

    def _link_targets(self, pages: list[_Page]) -> dict[str, tuple[str, str]]:
        """What a link may name -> (the target's key, its title): a note name (Obsidian) or a path (Notion, Confluence)."""
        targets: dict[str, tuple[str, str]] = {}
        for page in pages:
            if not page.title:
                continue
            path = page.entry.path
            targets[path] = (path, page.title)
            if self.flavour == "obsidian":
                targets.setdefault(PurePosixPath(path).stem.lower(), (path, page.title))
                targets.setdefault(str(PurePosixPath(path).with_suffix("")).lower(), (path, page.title))
        return targets

    def _fetch(self, entry: Entry, targets: dict[str, tuple[str, str]]) -> bytes:
        if entry.error is not None or entry.read is None:
            raise ItemError(entry.path, entry.error or "The file could not be read.")
        if entry.size is not None and entry.size > settings.IMPORT_MAX_FILE_SIZE:
            raise ItemError(entry.path, _too_large())
        data = entry.read()
        suffix = PurePosixPath(entry.path).suffix.lower()
        if self.flavour == "obsidian" and suffix in _MARKDOWN_SUFFIXES:
            return _obsidian_text(decode_text(data), targets).encode()
        if self.flavour == "notion" and suffix in _MARKDOWN_SUFFIXES:
            return _notion_text(decode_text(data), entry.path, targets).encode()
        if self.flavour == "confluence":
            return _confluence_page(decode_text(data), entry.path, targets).encode()
        return data


def _flavour(config: Mapping[str, Any]) -> str:
    flavour = config.get("flavour", "files")
    if flavour not in FLAVOURS:
        raise SourceError(f"flavour: must be one of {', '.join(FLAVOURS)}, got {flavour!r}.")
    return flavour


def _check_fields(config: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise SourceError(f"{unknown[0]}: no such field; this kind takes {', '.join(sorted(allowed))}.")


_FLAVOUR_FIELD = ConfigField(
    "flavour",
    "Flavour",
    choices=FLAVOURS,
    default="files",
    help="files: every file as it is; obsidian: a vault; notion: a Markdown export; confluence: a space's HTML export.",
)


class FolderExport(_Export):
    """A folder on the server, inside one of CONNECTORS_LOCAL_ROOTS."""

    kind = "folder"
    label = "Folder on the server"
    fields = (
        ConfigField("path", "Folder", required=True, help="An absolute path inside one of the server's allowed roots."),
        _FLAVOUR_FIELD,
    )

    def __init__(self, root: Path, flavour: str) -> None:
        super().__init__(flavour)
        self.root = root

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> FolderExport:
        _check_fields(config, {"path", "flavour"})
        roots = [Path(r) for r in settings.CONNECTORS_LOCAL_ROOTS]
        if not roots:
            raise SourceError(
                "Folder sources are turned off on this server: an operator lists the folders they may read in CONNECTORS_LOCAL_ROOTS."
            )
        raw = config.get("path")
        if not isinstance(raw, str) or not raw.strip():
            raise SourceError("path: the folder to read is required.")
        path = Path(raw.strip())
        if not path.is_absolute():
            raise SourceError("path: must be an absolute path.")
        # Resolved, so neither `..` nor a link leads outside the allowed roots.
        resolved = path.resolve()
        if not any(resolved == root.resolve() or resolved.is_relative_to(root.resolve()) for root in roots):
            raise SourceError(f"path: {raw} is outside the folders this server may read ({', '.join(str(r) for r in roots)}).")
        return cls(resolved, _flavour(config))

    def _entries(self) -> list[Entry]:
        if not self.root.is_dir():
            raise SourceError(f"The folder {self.root} does not exist or is not a folder.")
        entries = []
        try:
            for directory, folders, names in os.walk(self.root, followlinks=False):
                here = Path(directory)
                folders[:] = sorted(f for f in folders if not f.startswith("."))
                for name in sorted(names):
                    if name.startswith("."):
                        continue
                    path = here / name
                    relative = path.relative_to(self.root).as_posix()
                    if path.is_symlink():
                        entries.append(Entry(relative, None, "link", error="Symbolic links are not followed."))
                        continue
                    if not path.is_file():
                        continue
                    stat = path.stat()
                    entries.append(
                        Entry(relative, stat.st_size, f"stat:{stat.st_size}:{stat.st_mtime_ns}", read=partial(_read_file, path))
                    )
        except OSError as exc:
            raise SourceError(f"The folder {self.root} could not be read: {exc.strerror or exc}.") from exc
        return entries

    def _origin(self, path: str) -> str:
        return str(self.root / path)


def _read_file(path: Path) -> bytes:
    limit = settings.IMPORT_MAX_FILE_SIZE
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ItemError(path.name, f"The file could not be read: {exc.strerror or exc}.") from exc
    if len(data) > limit:
        raise ItemError(path.name, _too_large())
    return data


class ArchiveExport(_Export):
    """An uploaded ZIP (sources.upload), kept in the imports storage; a new upload replaces it and syncs again."""

    kind = "zip"
    label = "Uploaded ZIP export"
    fields = (_FLAVOUR_FIELD,)

    def __init__(self, archive: str, flavour: str) -> None:
        super().__init__(flavour)
        self.archive = archive

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> ArchiveExport:
        # `archive` is set by the server when a ZIP is uploaded (connectors.services.source_upload), not by people.
        _check_fields(config, {"flavour", "archive"})
        flavour = _flavour(config)
        return cls(str(config.get("archive") or ""), flavour)

    def _entries(self) -> list[Entry]:
        if not self.archive:
            raise SourceError("No ZIP has been uploaded to this source yet: upload one (sources.upload or the Sources page).")
        storage = import_storage()
        opener = partial(storage.open, self.archive, "rb")
        try:
            with opener() as handle, zipfile.ZipFile(handle) as archive:
                stamps = {info.filename: f"crc32:{info.CRC:08x}:{info.file_size}" for info in archive.infolist()}
            entries = expand(opener, budget=ExpansionBudget())
        except FileRejected as exc:
            raise SourceError(f"The uploaded ZIP cannot be read: {exc.reason}") from exc
        except (zipfile.BadZipFile, EOFError) as exc:
            raise SourceError(f"The uploaded ZIP cannot be read: {exc}.") from exc
        except storage_errors() as exc:
            raise SourceError(
                "The uploaded ZIP could not be read from the file storage; try again later.", transient=True
            ) from exc
        found = []
        for entry in entries:
            if any(part.startswith(".") for part in PurePosixPath(entry.path).parts):
                continue  # a vault's .obsidian settings, .DS_Store and the like
            read = partial(_read_entry, entry.path, entry.read) if entry.read is not None else None
            stamp = stamps.get(entry.path, f"size:{entry.size}")
            found.append(Entry(entry.path, entry.size, stamp, read=read, error=entry.error))
        return found

    def _origin(self, path: str) -> str:
        return f"{PurePosixPath(self.archive).name}/{path}"


def _read_entry(path: str, read: Callable[[], bytes]) -> bytes:
    try:
        return read()
    except FileRejected as exc:
        raise ItemError(path, exc.reason) from exc


# Obsidian ----------------------------------------------------------------------------------------


def _obsidian_text(text: str, targets: dict[str, tuple[str, str]]) -> str:
    """`[[folder/Note#Heading|alias]]` -> `[[Note|alias]]` (the target's title); an embed `![[x.png]]` becomes its name."""

    def rewrite(match: re.Match[str]) -> str:
        embed, inner = match.group(1), match.group(2)
        target, _, alias = inner.partition("|")
        name = target.split("#", 1)[0].strip()
        found = targets.get(name.lower()) or targets.get(PurePosixPath(name).stem.lower())
        if embed:
            return alias or PurePosixPath(name).name
        if found is None:
            return f"[[{name}|{alias}]]" if alias and name else f"[[{name or alias}]]"
        title = found[1]
        return f"[[{title}|{alias}]]" if alias and alias != title else f"[[{title}]]"

    return _WIKI_LINK.sub(rewrite, text)


# Notion ------------------------------------------------------------------------------------------


def _relative_target(link: str, here: str) -> str | None:
    """The export path a relative link from `here` points at, or None for a URL or an anchor."""
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    joined = PurePosixPath(here).parent / unquote(parts.path)
    resolved: list[str] = []
    for part in joined.parts:
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
        elif part not in ("", "."):
            resolved.append(part)
    return "/".join(resolved)


def _notion_text(text: str, path: str, targets: dict[str, tuple[str, str]]) -> str:
    """Links between the export's pages become wiki links to the target's title; Notion's ids leave the rest."""

    def rewrite(match: re.Match[str]) -> str:
        label, link = match.group(1), match.group(2)
        target = _relative_target(link, path)
        found = targets.get(target) if target else None
        if found is None:
            return _NOTION_ID.sub("", match.group(0))
        title = found[1]
        label = _NOTION_ID.sub("", label).strip()
        return f"[[{title}|{label}]]" if label and label != title else f"[[{title}]]"

    return _MARKDOWN_LINK.sub(rewrite, text)


# Confluence --------------------------------------------------------------------------------------


def _confluence_title(data: bytes) -> str | None:
    match = re.search(rb"<title>(.*?)</title>", data[:65536], re.IGNORECASE | re.DOTALL)
    if match is None:
        return None
    import html

    title = html.unescape(match.group(1).decode("utf-8", "replace")).strip()
    # "Space name : Page title"
    return title.split(" : ", 1)[1].strip() if " : " in title else title or None


# The export's furniture around a page: breadcrumbs, navigation, "Created by..." and the attachments list.
_CONFLUENCE_CHROME_IDS = ("breadcrumb-section", "footer", "navigation", "main-header")
_CONFLUENCE_CHROME_CLASSES = ("page-metadata", "pageSection")


def _confluence_page(text: str, path: str, targets: dict[str, tuple[str, str]]) -> str:
    """The page's own content under its title, links to other pages as wiki links to their titles."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "lxml")
    title = _confluence_title(text.encode()) or targets.get(path, (path, PurePosixPath(path).stem))[1]
    chrome = [tag for name in _CONFLUENCE_CHROME_IDS for tag in soup.find_all(id=name)]
    chrome += [tag for name in _CONFLUENCE_CHROME_CLASSES for tag in soup.find_all(class_=name)]
    for tag in chrome:
        tag.decompose()
    for anchor in soup.find_all("a", href=True):
        target = _relative_target(str(anchor["href"]), path)
        found = targets.get(target) if target else None
        if found is not None:
            label = anchor.get_text(" ", strip=True)
            anchor.replace_with(f"[[{found[1]}|{label}]]" if label and label != found[1] else f"[[{found[1]}]]")
    content = soup.find(id="main-content") or soup.body or soup
    page = BeautifulSoup("<html><head><title></title></head><body><h1></h1></body></html>", "lxml")
    assert page.title is not None and page.h1 is not None and page.body is not None
    page.title.string = title
    page.h1.string = title
    page.body.append(content)
    return str(page)
