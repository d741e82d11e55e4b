"""The document page: a cited passage highlighted by its offsets, text never shown as markup, 404 when not visible."""

from __future__ import annotations

import pytest

from tests.factories import CollectionFactory, DocumentFactory

OWLS = "# Owls\n\nOwls hunt mice at night in the forest. Their soft feathers make their flight silent.\n\nBarn owls nest in old barns."


@pytest.fixture
def corpus(cast):
    return {
        "owls": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        "secret": DocumentFactory(
            collection=cast.private, created_by=cast.alice, title="Secret owls", text="The barn code is 4711."
        ),
        "other_team": DocumentFactory(
            collection=CollectionFactory(team=cast.charlie.team), created_by=cast.charlie, title="Their owls", text="Owls."
        ),
    }


def test_the_document_page_highlights_the_cited_passage(signed_in, cast, corpus):
    doc = corpus["owls"]
    start = OWLS.index("Owls hunt")
    end = OWLS.index("forest.") + len("forest.")
    html = signed_in(cast.bob).get(f"/doc/{doc.pk}?v={doc.version}&start={start}&end={end}").content.decode()
    assert '<mark id="passage">Owls hunt mice at night in the forest.</mark>' in html
    assert "# Owls\n\n<mark" in html and "</mark> Their soft feathers" in html


@pytest.mark.parametrize(
    "query", ["v=1&start=50&end=10", "start=0&end=99999", "start=-1&end=5", "start=a&end=b", "start=" + "9" * 40 + "&end=1"]
)
def test_bad_offsets_show_the_document_without_a_highlight(signed_in, cast, corpus, query):
    response = signed_in(cast.bob).get(f"/doc/{corpus['owls'].pk}?{query}")
    assert response.status_code == 200 and b"<mark" not in response.content and b"Barn owls nest" in response.content


def test_offsets_of_another_version_are_not_highlighted(signed_in, cast, corpus):
    response = signed_in(cast.bob).get(f"/doc/{corpus['owls'].pk}?v=99&start=0&end=5")
    assert b"<mark" not in response.content and b"has changed since version 99" in response.content


def test_an_invisible_or_missing_document_is_404(signed_in, cast, corpus):
    bob = signed_in(cast.bob)
    assert bob.get(f"/doc/{corpus['secret'].pk}").status_code == 404
    assert bob.get(f"/doc/{corpus['other_team'].pk}").status_code == 404
    assert bob.get("/doc/00000000-0000-0000-0000-000000000000").status_code == 404
    assert bob.get("/doc/not-a-uuid").status_code == 404
    assert signed_in(cast.alice).get(f"/doc/{corpus['secret'].pk}").status_code == 200


def test_document_text_is_shown_as_text_never_as_markup(signed_in, cast):
    hostile = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="<img src=x onerror=alert(1)>",
        text="<script>alert(1)</script>\n\n![pixel](http://tracker.test/p.png)",
    )
    html = signed_in(cast.bob).get(f"/doc/{hostile.pk}?start=0&end=25").content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
