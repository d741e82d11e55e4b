"""Fixtures of the indexing tests: the `llm` graph extractor reading through the scripted fake LLM."""

from __future__ import annotations

import pytest

from rag.providers import fakes, retry


@pytest.fixture
def graph_llm(settings, monkeypatch):
    """RAG_GRAPH_EXTRACTOR=llm with its own fake model; tests script its answers. Retries never really sleep."""
    settings.RAG_GRAPH_EXTRACTOR = "llm"
    settings.RAG_GRAPH_LLM_MODEL = "fake-graph-llm"
    fake = fakes.fake_llm("fake-graph-llm")
    fake.reset()
    monkeypatch.setattr(retry, "sleep", lambda seconds: None)
    yield fake
    fake.reset()
