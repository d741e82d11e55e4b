"""Obsidian, Notion and Confluence exports, as a folder or an uploaded ZIP: synced, changed, synced again."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile

from connectors.models import SourceSync, SyncedSource
from connectors.services import source_create, source_upload
from documents.models import Document
from rag.models import Entity, Relation
from tests.conftest import Cast
from tests.connectors.conftest import SyncAndIndex, embedded_texts, write

NOTION_ID = "0123456789abcdef0123456789abcdef"
OTHER_ID = "fedcba9876543210fedcba9876543210"


def counts(sync: SourceSync) -> tuple[int, int, int, int, int, int]:
    return (sync.seen, sync.created, sync.changed, sync.unchanged, sync.deleted, sync.failed)


def live_titles(cast: Cast) -> dict[str, Document]:
    return {d.title: d for d in Document.objects.filter(collection=cast.handbook, archived_at__isnull=True)}


def zipped(files: dict[str, str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return SimpleUploadedFile("vault.zip", buffer.getvalue(), content_type="application/zip")


def zip_source(cast: Cast, flavour: str) -> SyncedSource:
    return source_create(
        by=cast.alice, name=flavour, kind="zip", config={"flavour": flavour}, collection=cast.handbook, sync=False
    )


def upload_and_sync(source: SyncedSource, files: dict[str, str], sync_and_index: SyncAndIndex) -> SourceSync:
    source_upload(source=source, upload=zipped(files))
    source.refresh_from_db()
    return sync_and_index(source)


VAULT = {
    "Home.md": "# Welcome\n\nStart with [[Projects/Alpha#Goals|the alpha project]] and [[Beta]].\n\n![[diagram.png]]\n",
    "Projects/Alpha.md": "Alpha is the first project. It depends on [[Beta]].\n",
    "Beta.md": "Beta is the shared library.\n",
    "diagram.png": "\x89PNG not a document",
    ".obsidian/app.json": "{}",
}


def test_an_obsidian_vault_zip_keeps_its_notes_and_wiki_links_in_sync(cast: Cast, sync_and_index: SyncAndIndex) -> None:
    source = zip_source(cast, "obsidian")
    first = upload_and_sync(source, VAULT, sync_and_index)
    assert counts(first) == (3, 3, 0, 0, 0, 0), first.errors
    documents = live_titles(cast)
    assert set(documents) == {"Home", "Alpha", "Beta"}, "notes are titled by their note name"
    assert "[[Alpha|the alpha project]] and [[Beta]]" in documents["Home"].text
    assert "diagram.png" in documents["Home"].text and "![[" not in documents["Home"].text
    assert documents["Alpha"].origin == "vault.zip/Projects/Alpha.md"
    beta = Entity.objects.get(team=cast.alice.team, key="beta")
    linking = set(Relation.objects.filter(target=beta, predicate="LINKS_TO").values_list("document_id", flat=True))
    assert linking == {documents["Home"].pk, documents["Alpha"].pk}, "wiki links are graph edges"

    embedded = len(embedded_texts())
    same = upload_and_sync(source, VAULT, sync_and_index)
    assert counts(same) == (3, 0, 0, 3, 0, 0)
    assert len(embedded_texts()) == embedded, "an unchanged re-sync embeds nothing"

    changed = dict(VAULT)
    changed["Beta.md"] = "Beta is the shared library, now in version 2.\n"
    changed["Gamma.md"] = changed.pop("Projects/Alpha.md")  # renamed
    changed["Delta.md"] = "A new note.\n"
    del changed["Home.md"]
    after = upload_and_sync(source, changed, sync_and_index)
    assert counts(after) == (3, 2, 1, 0, 2, 0)
    assert set(live_titles(cast)) == {"Beta", "Gamma", "Delta"}
    assert Document.objects.get(pk=documents["Home"].pk).archived_at is not None
    assert Document.objects.get(pk=documents["Beta"].pk).version == 2


def test_a_notion_export_loses_its_ids_and_links_by_title(cast: Cast, root: Path, sync_and_index: SyncAndIndex) -> None:
    write(
        root,
        {
            f"Team Wiki {NOTION_ID}.md": f"# Team Wiki\n\nSee [On-call rota](Team%20Wiki%20{NOTION_ID}/On-call%20rota%20{OTHER_ID}.md) "
            "and [the site](https://example.org/x).\n",
            f"Team Wiki {NOTION_ID}/On-call rota {OTHER_ID}.md": "# On-call rota\n\nWho answers the pager.\n",
        },
    )
    source = source_create(
        by=cast.alice,
        name="Notion",
        kind="folder",
        config={"path": str(root), "flavour": "notion"},
        collection=cast.handbook,
        sync=False,
    )
    first = sync_and_index(source)
    assert counts(first) == (2, 2, 0, 0, 0, 0), first.errors
    documents = live_titles(cast)
    assert set(documents) == {"Team Wiki", "On-call rota"}
    assert "See [[On-call rota]] and [the site](https://example.org/x)." in documents["Team Wiki"].text
    assert NOTION_ID not in documents["Team Wiki"].text

    (root / f"Team Wiki {NOTION_ID}/On-call rota {OTHER_ID}.md").write_text("# On-call rota\n\nWho answers the pager at night.\n")
    (root / f"Team Wiki {NOTION_ID}/Runbook {OTHER_ID[::-1]}.md").write_text("# Runbook\n\nSteps.\n")
    again = sync_and_index(source)
    assert counts(again) == (3, 1, 1, 1, 0, 0)
    assert "at night" in Document.objects.get(pk=documents["On-call rota"].pk).text


CONFLUENCE_PAGE = """<!DOCTYPE html><html><head><title>Engineering : {title}</title></head><body>
<div id="page"><div id="main"><div id="main-header"><div id="breadcrumb-section"><ol id="breadcrumbs">
<li><a href="index.html">Engineering</a></li><li><a href="Home_1.html">Home</a></li></ol></div>
<h1 id="title-heading"><span id="title-text">Engineering : {title}</span></h1></div>
<div id="content" class="view"><div class="page-metadata">Created by Ann, last modified on Jan 01</div>
<div id="main-content" class="wiki-content group">{body}</div>
<div class="pageSection group"><h2 id="attachments">Attachments:</h2><a href="attachments/1/x.png">x.png</a></div>
</div></div><div id="footer"><p>Document generated by Confluence</p></div></div></body></html>"""


def test_a_confluence_space_export_keeps_page_titles_and_drops_the_chrome(cast: Cast, sync_and_index: SyncAndIndex) -> None:
    source = zip_source(cast, "confluence")
    files = {
        "index.html": "<html><head><title>Engineering</title></head><body><ul><li>Home</li></ul></body></html>",
        "Home_1.html": CONFLUENCE_PAGE.format(
            title="Home", body='<p>Read the <a href="Deploy-guide_2.html">deploy guide</a>.</p>'
        ),
        "Deploy-guide_2.html": CONFLUENCE_PAGE.format(title="Deploy guide", body="<p>Run make deploy.</p>"),
        "attachments/1/x.png": "\x89PNG",
        "styles/site.css": "body {}",
    }
    first = upload_and_sync(source, files, sync_and_index)
    assert counts(first) == (2, 2, 0, 0, 0, 0), first.errors
    documents = live_titles(cast)
    assert set(documents) == {"Home", "Deploy guide"}
    home = documents["Home"].text
    assert "Read the [[Deploy guide|deploy guide]]." in home
    for chrome in ("Created by Ann", "Attachments", "Document generated by Confluence", "Engineering :"):
        assert chrome not in home

    files["Deploy-guide_2.html"] = CONFLUENCE_PAGE.format(title="Deploy guide", body="<p>Run make deploy, then check.</p>")
    again = upload_and_sync(source, files, sync_and_index)
    assert counts(again) == (2, 0, 1, 1, 0, 0)
