"""Fixtures shared by the answer tests (import them into a test module to use them)."""
from __future__ import annotations

import pytest

from rag import indexing, llm
from tests.factories import CollectionFactory, DocumentFactory

OWLS = "# Owls\n\nOwls hunt mice at night in the forest. Their soft feathers make their flight silent.\n\nBarn owls nest in old barns."
SECRET = "# Secret\n\nOwls secretly hunt mice in the private barn. The barn code is 4711."
VOLCANO = "# Volcanoes\n\nVolcanoes erupt molten lava. Lava cools into basalt rock."


@pytest.fixture
def fake_llm(settings, monkeypatch):
    """Answers come from the deterministic fake LLM; retries never really sleep."""
    settings.RAG_LLM_PROVIDER = "fake"
    settings.RAG_LLM_MODEL = "fake-llm"
    fake = llm.fake_llm("fake-llm")
    fake.reset()
    monkeypatch.setattr(llm, "sleep", lambda seconds: None)
    yield fake
    fake.reset()


@pytest.fixture
def corpus(cast):
    docs = {
        "owls": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS),
        "volcano": DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Volcanoes", text=VOLCANO),
        "secret": DocumentFactory(collection=cast.private, created_by=cast.alice, title="Secret owls", text=SECRET),
        "other_team": DocumentFactory(collection=CollectionFactory(team=cast.charlie.team), created_by=cast.charlie,
                                      title="Their owls", text="Owls hunt mice in another team's barn."),
    }
    indexing.index_documents(document_ids=[d.pk for d in docs.values()])
    return docs
