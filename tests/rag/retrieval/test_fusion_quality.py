"""Hybrid fusion as a new user meets it, with the real local MiniLM: a weak keyword match must not beat a
strong meaning match because it tops its own list, and one document must not fill the top of a page."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.indexing.pipeline import index_documents
from rag.providers.embeddings import reset_provider_cache
from rag.retrieval.fusion import relevance_fusion, spread_documents
from rag.retrieval.search import search
from tests.factories import DocumentFactory

QUESTION = "connecting to company network while working remotely"

# The demo handbook's "Remote work" page, one chunk per section.
REMOTE_WORK = (Path(__file__).resolve().parents[3] / "documents" / "demo" / "handbook-remote.md").read_text()
WIREGUARD = (
    "# VPN\n\nInstall the WireGuard client to reach the intranet from home. "
    "Import your configuration from the IT portal and switch the tunnel on."
)
OTHERS = {
    "Expense reports": "# Expense reports\n\nSubmit receipts within 30 days through the finance tool.",
    "Deploying to production": "# Deploying to production\n\nRun the release pipeline, then watch the dashboards.",
}


@pytest.fixture
def minilm(settings):
    settings.RAG_EMBEDDING_PROVIDER = "local"
    settings.RAG_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
    settings.RAG_CHUNK_SIZE, settings.RAG_CHUNK_OVERLAP = 40, 0  # one chunk per section of "Remote work"
    reset_provider_cache()
    yield
    reset_provider_cache()


@pytest.fixture
def handbook(cast, minilm):
    texts = {"Remote work": REMOTE_WORK, "VPN": WIREGUARD, **OTHERS}
    docs = {
        title: DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=title, text=text)
        for title, text in texts.items()
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def titles(user, mode: str, limit: int = 10) -> list[str]:
    result = search(user=user, query=QUESTION, mode=mode, limit=limit, threshold=0)
    return [ranked.document.title for ranked in result.ranked()]


def test_a_strong_meaning_match_beats_chunks_that_only_share_two_common_words(cast, handbook):
    vector, keyword = titles(cast.bob, "vector"), titles(cast.bob, "keyword")
    # The trap in a small handbook: meaning finds the WireGuard page, words find "Remote work" ("remote",
    # "work"), and no passage holds "connecting", "company" or "network".
    assert vector[0] == "VPN"
    assert keyword[0] == "Remote work"
    assert titles(cast.bob, "hybrid")[0] == "VPN"


def test_one_document_does_not_fill_the_top_of_a_page(cast, handbook, settings):
    assert settings.RAG_MAX_CHUNKS_PER_DOCUMENT == 3
    assert titles(cast.bob, "keyword").count("Remote work") >= 3, "the document has as many matching chunks as the cap"
    page = titles(cast.bob, "hybrid", limit=4)
    assert page.count("Remote work") <= 3 and len(page) == 4


def test_a_weak_top_match_adds_little_and_an_absent_id_counts_zero():
    vector = [("wireguard", 0.62), ("remote-1", 0.30)]
    keyword = [("remote-1", 0.35), ("remote-2", 0.33), ("wireguard", 0.05)]
    fused = dict(relevance_fusion([vector, keyword], weights=[2, 1]))
    assert list(fused)[0] == "wireguard"
    assert fused["wireguard"] == pytest.approx((2 * 0.62 + 0.05) / 3)
    assert fused["remote-2"] == pytest.approx(0.33 / 3)
    with pytest.raises(ValueError):
        relevance_fusion([vector], weights=[0])


def test_spread_documents_keeps_order_but_caps_each_document_before_the_rest():
    ranked = ["a1", "a2", "a3", "b1", "a4", "c1"]
    document_of = {item: item[0] for item in ranked}
    assert spread_documents(ranked, document_of, per_document=2) == ["a1", "a2", "b1", "c1", "a3", "a4"]
