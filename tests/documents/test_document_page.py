"""The document page: Markdown rendered safely, a cited passage highlighted by its offsets, 404 when not visible."""

from __future__ import annotations

import pytest

from documents.models import Document
from tests.conftest import Cast, SignIn
from tests.factories import CollectionFactory, DocumentFactory

OWLS = "# Owls\n\nOwls hunt mice at night in the forest. Their soft feathers make their flight silent.\n\nBarn owls nest in old barns."


@pytest.fixture
def corpus(cast: Cast) -> dict[str, Document]:
    return {
        "owls": DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        "secret": DocumentFactory.create(
            collection=cast.private, created_by=cast.alice, title="Secret owls", text="The barn code is 4711."
        ),
        "other_team": DocumentFactory.create(
            collection=CollectionFactory.create(team=cast.charlie.team), created_by=cast.charlie, title="Their owls", text="Owls."
        ),
    }


def test_the_document_page_highlights_the_cited_passage(signed_in: SignIn, cast: Cast, corpus: dict[str, Document]) -> None:
    doc = corpus["owls"]
    start = OWLS.index("Owls hunt")
    end = OWLS.index("forest.") + len("forest.")
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}?v={doc.version}&start={start}&end={end}").content.decode()
    assert (
        '<div class="doc-text"><p><mark id="passage" class="passage">Owls hunt mice at night in the forest.</mark> '
        "Their soft feathers" in html
    )


def test_a_passage_spanning_blocks_is_marked_in_each_and_its_blocks_keep_their_markup(signed_in: SignIn, cast: Cast) -> None:
    text = (
        "# Deploying\n\nIntro.\n\n## Steps\n\n1. Merge after **two** approvals.\n2. Promote the image.\n\n## Rollback\n\nRun it."
    )
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Deploying", text=text)
    start, end = text.index("## Steps"), text.index("## Rollback")  # a chunk's offsets: from one heading to the next
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}?v={doc.version}&start={start}&end={end}").content.decode()
    assert '<h2><mark id="passage" class="passage">Steps</mark></h2>' in html
    assert '<li><mark class="passage">Merge after </mark><strong><mark class="passage">two</mark></strong>' in html
    assert '<li><mark class="passage">Promote the image.</mark></li>\n</ol>\n<h2>Rollback</h2>' in html
    assert html.count('id="passage"') == 1 and "<p>Intro.</p>" in html and "<p>Run it.</p>" in html


def test_the_document_page_renders_markdown_headings_lists_code_and_safe_links(signed_in: SignIn, cast: Cast) -> None:
    text = (
        "# Title\n\n## Section\n\n- one\n- *two*\n\n```bash\n./deploy <now>\n```\n\n"
        "[docs](https://example.test/docs) [mail](mailto:a@b.test) [bad](javascript:alert(1)) "
        "[data](data:text/html,x) [local](/doc/x)"
    )
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Md", text=text)
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}").content.decode()
    body = html.split('<div class="doc-text">')[1]
    assert "<h1>Title</h1>" in body and "<h2>Section</h2>" in body
    assert "<ul>\n<li>one</li>\n<li><em>two</em></li>\n</ul>" in body
    assert '<pre><code class="language-bash">./deploy &lt;now&gt;\n</code></pre>' in body
    rel = 'rel="nofollow noopener noreferrer"'
    assert f'<a href="https://example.test/docs" {rel}>docs</a>' in body and f'<a href="mailto:a@b.test" {rel}>mail</a>' in body
    assert f'<a href="/doc/x" {rel}>local</a>' in body
    assert "[bad](javascript:alert(1))" in body and "[data](data:text/html,x)" in body, "unsafe links stay text"
    assert 'href="javascript' not in body and 'href="data' not in body


@pytest.mark.parametrize(
    "query", ["v=1&start=50&end=10", "start=0&end=99999", "start=-1&end=5", "start=a&end=b", "start=" + "9" * 40 + "&end=1"]
)
def test_bad_offsets_show_the_document_without_a_highlight(
    signed_in: SignIn, cast: Cast, corpus: dict[str, Document], query: str
) -> None:
    response = signed_in(cast.bob).get(f"/doc/{corpus['owls'].pk}?{query}")
    assert response.status_code == 200 and b"<mark" not in response.content and b"Barn owls nest" in response.content


def test_offsets_of_another_version_are_not_highlighted(signed_in: SignIn, cast: Cast, corpus: dict[str, Document]) -> None:
    response = signed_in(cast.bob).get(f"/doc/{corpus['owls'].pk}?v=99&start=0&end=5")
    assert b"<mark" not in response.content and b"has changed since version 99" in response.content


def test_an_invisible_or_missing_document_is_404(signed_in: SignIn, cast: Cast, corpus: dict[str, Document]) -> None:
    bob = signed_in(cast.bob)
    assert bob.get(f"/doc/{corpus['secret'].pk}").status_code == 404
    assert bob.get(f"/doc/{corpus['other_team'].pk}").status_code == 404
    assert bob.get("/doc/00000000-0000-0000-0000-000000000000").status_code == 404
    assert bob.get("/doc/not-a-uuid").status_code == 404
    assert signed_in(cast.alice).get(f"/doc/{corpus['secret'].pk}").status_code == 200


def test_raw_html_in_a_document_is_shown_as_text_and_its_images_never_load(signed_in: SignIn, cast: Cast) -> None:
    hostile = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="<img src=x onerror=alert(1)>",
        text="<script>alert(1)</script>\n\n![pixel](http://tracker.test/p.png)",
    )
    html = signed_in(cast.bob).get(f"/doc/{hostile.pk}?start=0&end=25").content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "tracker.test" not in html and '<span class="image">[image: pixel]</span>' in html, "an image is never loaded"


def test_markdown_tables_are_rendered_as_tables_with_their_alignment_as_classes(signed_in: SignIn, cast: Cast) -> None:
    text = "| Step | Owner | Minutes |\n| --- | :---: | ---: |\n| Merge | *dev* | 5 |\n| Promote | ops | 15 |"
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Runbook", text=text)
    body = signed_in(cast.bob).get(f"/doc/{doc.pk}").content.decode().split('<div class="doc-text">')[1]
    assert '<table>\n<thead>\n<tr>\n<th>Step</th>\n<th class="align-center">Owner</th>' in body
    assert '<td>Promote</td>\n<td class="align-center">ops</td>\n<td class="align-right">15</td>' in body
    assert "| --- |" not in body and "style=" not in body, "the CSP allows no style attribute"


def test_the_title_is_shown_once_when_the_text_opens_with_it(signed_in: SignIn, cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS)
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}").content.decode()
    assert html.count(">Owls</h1>") == 1 and '<div class="doc-text"><p>Owls hunt mice' in html


def test_a_heading_other_than_the_title_stays_in_the_text(signed_in: SignIn, cast: Cast) -> None:
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Birds of prey", text=OWLS)
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}").content.decode()
    assert "<h1>Birds of prey</h1>" in html and '<div class="doc-text"><h1>Owls</h1>' in html


def test_a_passage_starting_at_the_title_heading_is_highlighted_from_the_text_after_it(
    signed_in: SignIn, cast: Cast, corpus: dict[str, Document]
) -> None:
    doc = corpus["owls"]
    end = OWLS.index("forest.") + len("forest.")
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}?v={doc.version}&start=0&end={end}").content.decode()
    assert '<div class="doc-text"><p><mark id="passage" class="passage">Owls hunt mice at night in the forest.</mark>' in html
