"""Fixtures shared by the rag tests: the fake LLM and a small corpus the cast sees differently."""

from __future__ import annotations

import pytest

from rag.indexing.pipeline import index_documents
from rag.providers import fakes, retry
from tests.browser import tracker  # noqa: F401  (the browser tests' fixture)
from tests.factories import CollectionFactory, DocumentFactory
from tests.rag.texts import OWLS, SECRET, VOLCANO


@pytest.fixture
def fake_llm(settings, monkeypatch):
    """Answers come from the deterministic fake LLM; retries never really sleep."""
    settings.RAG_LLM_PROVIDER = "fake"
    settings.RAG_LLM_MODEL = "fake-llm"
    fake = fakes.fake_llm("fake-llm")
    fake.reset()
    monkeypatch.setattr(retry, "sleep", lambda seconds: None)
    yield fake
    fake.reset()


@pytest.fixture
def corpus(cast):
    docs = {
        "owls": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        "volcano": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Volcanoes", text=VOLCANO),
        "secret": DocumentFactory(collection=cast.private, created_by=cast.alice, title="Secret owls", text=SECRET),
        "other_team": DocumentFactory(
            collection=CollectionFactory(team=cast.charlie.team),
            created_by=cast.charlie,
            title="Their owls",
            text="Owls hunt mice in another team's barn.",
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs
