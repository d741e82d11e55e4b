"""The /rag and /graph pages (Django test client; tests/rag/test_rag_page_browser.py and test_graph_page_browser.py
drive them in Chromium)."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.core.exceptions import ValidationError


def test_the_pages_need_a_signed_in_user(client, corpus):
    for url in ("/rag", f"/doc/{corpus['owls'].pk}"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(f"/login?next={url.split('?')[0]}")


def test_the_rag_page_has_a_question_box_examples_and_a_strict_csp(signed_in, cast):
    cast.bob.team.example_questions = ["How many vacation days do I get?"]
    cast.bob.team.save()
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


def test_the_rag_page_offers_only_the_viewers_teams_example_questions_or_none(signed_in, cast):
    cast.bob.team.example_questions = ["Where is the Lisbon office?", 7, "  "]
    cast.bob.team.save()
    assert signed_in(cast.charlie).get("/rag").content.decode().count('class="example"') == 0, "charlie's team has none"
    html = signed_in(cast.bob).get("/rag").content.decode()
    assert html.count('class="example"') == 1 and "Where is the Lisbon office?" in html


def test_example_questions_must_be_a_list_of_strings(cast):
    team = cast.bob.team
    team.example_questions = {"not": "a list"}
    with pytest.raises(ValidationError):
        team.full_clean()
    team.example_questions = ["A question?"]
    team.full_clean()


def test_the_graph_page_needs_a_signed_in_user(client, cast):
    response = client.get("/graph?entity=7")
    assert response.status_code == 302 and response["Location"].startswith("/login?next=/graph")


def test_the_graph_page_loads_the_vendored_cytoscape_under_a_strict_csp(signed_in, cast):
    response = signed_in(cast.bob).get("/graph")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="query"' in html and 'id="graph"' in html and 'id="neighbours"' in html
    csp = response["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", csp).group(1)
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert f'<script nonce="{nonce}" src="/static/rag/vendor/cytoscape/cytoscape.min.js"></script>' in html
    assert html.count("<script") == html.count(f'<script nonce="{nonce}"') == 2
    # Cytoscape adds a <style> of its own unless this one (with the nonce) is already in the page.
    assert f'<style nonce="{nonce}" id="__________cytoscape_stylesheet">' in html
    assert "Heading or key phrase" in html, "the legend names the kinds of entities"


def test_the_graph_page_takes_only_get(signed_in, cast):
    assert signed_in(cast.bob).post("/graph").status_code == 405


def test_the_vendored_cytoscape_and_its_licence_are_served_from_the_static_files(client):
    script = client.get("/static/rag/vendor/cytoscape/cytoscape.min.js")
    assert script.status_code == 200 and script["Content-Type"].startswith("text/javascript")
    assert b"cytoscape" in b"".join(script.streaming_content)[:2000]
    assert finders.find("rag/vendor/cytoscape/LICENSE")
    licence = client.get("/static/rag/vendor/cytoscape/LICENSE")
    assert licence.status_code == 200
    text = b"".join(licence.streaming_content).decode()
    assert "The Cytoscape Consortium" in text and "Permission is hereby granted, free of charge" in text


def test_every_page_names_its_icon_and_the_icon_is_served(client, signed_in, cast):
    """Browsers ask for /favicon.ico unless a page names its icon: no page should cause a 404."""
    login = client.get("/login")
    bob = signed_in(cast.bob)
    for response in (login, bob.get("/rag"), bob.get("/graph")):
        href = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', response.content.decode())
        assert href, response.content.decode()[:400]
        icon = client.get(href.group(1))
        assert icon.status_code == 200 and icon["Content-Type"].startswith("image/svg+xml")
        assert b"<svg" in b"".join(icon.streaming_content)
