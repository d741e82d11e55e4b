"""The /rag page, the document page with its highlighted passage, and sign-in (Django test client)."""

from __future__ import annotations

import re

import pytest

from tests.factories import DocumentFactory
from tests.rag.texts import OWLS


@pytest.fixture
def signed_in(client):
    def sign_in(user):
        user.save(update_fields=["password"])  # the factory sets the password without saving it
        client.force_login(user)
        return client

    return sign_in


def test_the_pages_need_a_signed_in_user(client, corpus):
    for url in ("/rag", f"/doc/{corpus['owls'].pk}"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(f"/login?next={url.split('?')[0]}")


def test_signing_in_lands_on_the_rag_page(client, cast):
    cast.bob.save(update_fields=["password"])
    page = client.get("/login")
    assert page.status_code == 200 and b'name="password"' in page.content
    wrong = client.post("/login", {"username": "bob", "password": "wrong"})
    assert wrong.status_code == 200 and b"did not match" in wrong.content
    response = client.post("/login", {"username": "bob", "password": "password", "next": "/rag"})
    assert response.status_code == 302 and response["Location"] == "/rag"
    assert client.get("/rag").status_code == 200


def test_the_rag_page_has_a_question_box_examples_and_a_strict_csp(signed_in, cast):
    response = signed_in(cast.bob).get("/rag")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="query"' in html and "How many vacation days do I get?" in html
    assert "Handbook" in html and "Private" not in html, "the collection filter lists only visible collections"
    csp = response["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", csp).group(1)
    assert "default-src 'none'" in csp and "img-src 'self'" in csp and "unsafe-inline" not in csp
    assert f'<script nonce="{nonce}">' in html and html.count("<script") == 1
    assert signed_in(cast.alice).get("/rag").content.decode().count("Private") == 1


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


def test_signing_out_needs_a_post(signed_in, cast):
    client = signed_in(cast.bob)
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 302
    assert client.get("/rag").status_code == 302
