"""The hand-written demo questions end to end through rag.answer, extractive (no LLM), with the tests' fake embeddings.

The fake embeddings are a bag of words, so sentences are judged by the lexical test alone here; the
figures with the local MiniLM model are bench/extractive.py's (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest
from pytest_django import Settings

from documents.models import Document
from rag.indexing.pipeline import index_documents
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory
from tests.rag.answering.extractive_cases import CASES, Score, demo_texts

# Measured 0.923 / 0.880 with these settings when the floors were set.
MIN_PRECISION = 0.85
MIN_RECALL = 0.80


@pytest.fixture
def demo_corpus(cast: Cast, settings: Settings) -> list[Document]:
    settings.RAG_LLM_MODEL = ""
    # Bag-of-words vectors score a short question against a whole page low; the evidence gate is tested elsewhere.
    settings.RAG_ANSWER_MIN_SCORE = 0.05
    documents = [
        DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title=title, text=text)
        for title, text in demo_texts().items()
    ]
    index_documents(document_ids=[d.pk for d in documents])
    return documents


def test_extractive_answers_quote_the_sentences_that_answer_the_demo_questions(
    cast: Cast, api_for: ApiFor, demo_corpus: list[Document]
) -> None:
    api = api_for(cast.alice)
    score = Score()
    for case in CASES:
        response = api.post("rag.answer", {"query": case.question, "limit": 5})
        assert response.status_code == 200, response.content
        data = response.json()["data"]
        score.add(case, data["answer"])
        if not case.expected:
            assert data["mode"] == "insufficient", f"{case.question!r} has no answer in the corpus: {data['answer']!r}"
    report = f"precision {score.precision:.3f}, recall {score.recall:.3f}\n" + "\n".join(score.misses)
    assert score.precision >= MIN_PRECISION, report
    assert score.recall >= MIN_RECALL, report
    assert score.declined == score.unanswerable, report
