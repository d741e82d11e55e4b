"""What every connector yields: the items at a source, each fetched only when it changed.

A connector knows how to list a source and read one item; it knows nothing of documents, jobs or
permissions. The sync (connectors.sync) compares each item's `version` with what it stored last time:
an equal version costs no fetch, no parse and no embedding; a missing key archives its document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True)
class PreviousItem:
    """What the last sync stored for one key: its version and the connector's own state for it."""

    version: str
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceItem:
    """One file, page or object at a source."""

    # Stable within the source: a repository path, a page URL, a bucket key. A rename is a new key.
    key: str
    # A file name the parsers detect the format by ("guide.md", "index.html", "app.py").
    name: str
    # Changes whenever the content does (a blob id, an ETag, a content hash); equal to the stored one → skipped.
    version: str
    # Where a reader finds the original: a URL, "path@commit", "s3://bucket/key".
    origin: str
    # Reads the content; called only for a new or changed item, so an unchanged one is never downloaded.
    fetch: Callable[[], bytes]
    # The title when the source names it (a page's <title>, a wiki page name); otherwise the parser decides.
    title: str | None = None
    # Bytes, when known before fetching, so a limit is checked without reading.
    size: int | None = None
    # Keys of other items this one links to (wiki links, hyperlinks), for graph edges between documents.
    links: tuple[str, ...] = ()
    # The connector's own memory for this key (validators for a conditional GET, a page's outgoing links),
    # stored by the sync and handed back in `PreviousItem.state` next time.
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigField:
    """One field of a kind's configuration or secrets, as the Sources page and `sources.kinds` describe it.

    A kind lists them in `fields` and `secret_fields` (class attributes, optional); `from_config` still
    validates everything itself.
    """

    name: str
    label: str
    required: bool = False
    help: str = ""
    # The values it may take, shown as a choice; empty: free text.
    choices: tuple[str, ...] = ()
    default: str | int | bool | None = None
    # "text", "number", "boolean", "lines" (a list of strings, one per line).
    type: str = "text"


class SourceError(Exception):
    """The source as a whole cannot be read (unreachable host, bad credentials, bad configuration).

    The sync stops with this message and changes no document; `transient` errors are retried later.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


class ItemError(Exception):
    """One item cannot be read (over the size limit, binary, unreadable): recorded on the sync, the rest goes on."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class Connector(Protocol):
    """A kind of source, built from its configuration and (decrypted) secrets."""

    kind: ClassVar[str]

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> Connector:
        """Validate and build; a bad configuration raises SourceError with a message naming the field."""
        ...

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        """Every item at the source now. `previous` lets a connector skip work (a 304, an unchanged blob).

        One item's problem raises ItemError from its `fetch`; a problem with the whole listing raises
        SourceError. The sync treats keys not yielded as gone, so a connector that cannot finish listing
        must raise SourceError rather than stop early (or the rest would be archived).
        """
        ...

    @property
    def cursor(self) -> str:
        """After `items` is exhausted: where the source stood (a commit, a crawl time), shown and stored."""
        ...
