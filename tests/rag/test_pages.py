"""The /rag page (Django test client; tests/rag/test_rag_page_browser.py drives it in Chromium)."""

from __future__ import annotations

import re


def test_the_pages_need_a_signed_in_user(client, corpus):
    for url in ("/rag", f"/doc/{corpus['owls'].pk}"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(f"/login?next={url.split('?')[0]}")


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
