"""One module per kind of source; each yields `connectors.base.SourceItem`s and nothing else.

A kind is registered by one line in `KINDS` below: its `kind` name -> its class (a `connectors.base.Connector`).
A kind's optional `label`, `fields` and `secret_fields` (`connectors.base.ConfigField`) tell the Sources page and
`sources.kinds` which configuration fields and secrets it takes.
"""

from __future__ import annotations

from connectors.base import Connector, SourceError
from connectors.kinds.exports import ArchiveExport, FolderExport
from connectors.kinds.git import GitConnector
from connectors.kinds.s3 import S3Connector
from connectors.kinds.web import WebConnector

KINDS: dict[str, type[Connector]] = {
    FolderExport.kind: FolderExport,
    ArchiveExport.kind: ArchiveExport,
    WebConnector.kind: WebConnector,
    S3Connector.kind: S3Connector,
    GitConnector.kind: GitConnector,
}


def connector_class(kind: str) -> type[Connector]:
    try:
        return KINDS[kind]
    except KeyError:
        raise SourceError(f"Unknown kind of source {kind!r}; the kinds are {', '.join(sorted(KINDS))}.") from None
