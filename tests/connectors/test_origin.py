"""A synced document keeps a link to its origin: on its page, in documents.info and in an answer's citations;
its wiki links lead to the document of that title the reader may see."""

from __future__ import annotations

from pathlib import Path

from django.test import Client
from django.utils import timezone

from connectors.services import source_create
from documents.models import Document
from tests.conftest import ApiFor, Cast, SignIn
from tests.connectors.conftest import SyncAndIndex, write
from tests.factories import DocumentFactory
from tests.rag.conftest import fake_llm  # noqa: F401  (the rag tests' fixture)
from tests.rag.texts import OWLS


def test_the_origin_is_on_the_page_in_the_api_and_in_citations(
    cast: Cast,
    root: Path,
    sync_and_index: SyncAndIndex,
    api_for: ApiFor,
    signed_in: SignIn,
    fake_llm: object,  # noqa: F811
) -> None:
    write(
        root, {"Owls.md": OWLS + "\n\nSee also [[Barns|the barns note]].\n", "Barns.md": "# Barns\n\nOld barns shelter owls.\n"}
    )
    source = source_create(
        by=cast.alice,
        name="Vault",
        kind="folder",
        config={"path": str(root), "flavour": "obsidian"},
        collection=cast.handbook,
        sync=False,
    )
    sync_and_index(source)
    owls = Document.objects.get(title="Owls")
    assert owls.origin == str(root / "Owls.md")

    info = api_for(cast.bob).post("documents.info", {"id": str(owls.pk)}).json()["data"]
    assert info["origin"] == str(root / "Owls.md")

    answer = api_for(cast.bob).post("rag.answer", {"query": "What do owls hunt at night?"}).json()["data"]
    cited = {c["document"]["title"]: c["document"]["origin"] for c in answer["citations"]}
    assert cited.get("Owls") == str(root / "Owls.md"), answer

    page = signed_in(cast.bob).get(owls.url).content.decode()
    assert f'synced from <span class="origin">{root / "Owls.md"}</span>' in page
    assert '<a href="/doc/title/Barns" class="wiki"' in page


def test_a_wiki_link_leads_only_to_a_document_the_reader_may_see(cast: Cast, signed_in: SignIn, client: Client) -> None:
    barns = DocumentFactory.create(collection=cast.handbook, title="Barns", published_at=timezone.now())
    DocumentFactory.create(collection=cast.private, title="Vault", published_at=timezone.now())
    bob = signed_in(cast.bob)
    assert bob.get("/doc/title/barns")["Location"] == barns.url
    assert bob.get("/doc/title/Vault").status_code == 404, "a private document's title leads nowhere"
    client.logout()
    assert signed_in(cast.charlie).get("/doc/title/Barns").status_code == 404
