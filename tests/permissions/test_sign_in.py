"""Session sign-in and sign-out for the pages."""

from __future__ import annotations


def test_signing_in_lands_on_the_rag_page(client, cast):
    cast.bob.save(update_fields=["password"])
    page = client.get("/login")
    assert page.status_code == 200 and b'name="password"' in page.content
    wrong = client.post("/login", {"username": "bob", "password": "wrong"})
    assert wrong.status_code == 200 and b"did not match" in wrong.content
    response = client.post("/login", {"username": "bob", "password": "password", "next": "/rag"})
    assert response.status_code == 302 and response["Location"] == "/rag"
    assert client.get("/rag").status_code == 200


def test_signing_out_needs_a_post(signed_in, cast):
    client = signed_in(cast.bob)
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 302
    assert client.get("/rag").status_code == 302
