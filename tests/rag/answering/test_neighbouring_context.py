"""Neighbouring context: a passage cut mid-thought is widened with its neighbours' text, and stays an exact span."""

from __future__ import annotations

import pytest
from pytest_django import Settings

from documents.models import Document
from rag.answering.context import ends_mid_thought, starts_mid_thought, widen_after, widen_before, widen_passages
from rag.answering.passages import Passage, retrieve
from rag.indexing.pipeline import index_documents
from rag.models import Chunk
from rag.providers.fakes import FakeLLM
from tests.conftest import ApiFor, Cast
from tests.factories import DocumentFactory

# With 24-token chunks the long second sentence is cut by words: one chunk ends mid-sentence, the next starts mid-sentence.
OWLS = (
    "# Owls\n\nBarn owls nest in old barns. The owls of the northern forest hunt mice and voles and shrews "
    "along the frozen river banks during the long and quiet winter nights when the snow lies deep. "
    "Their soft feathers make their flight silent. Owlets hatch in spring and leave the nest in summer.\n\n"
    "## Volcanoes\n\nVolcanoes erupt molten lava and ash. Lava cools into basalt rock."
)
CUT_QUESTION = "Which owls of the northern forest hunt mice and voles and shrews?"


@pytest.mark.parametrize(
    ("text", "ends_cut", "starts_cut"),
    [
        ("Owls hunt mice.", False, False),
        ('He said "go."', False, False),
        ("Owls hunt mice and", True, False),
        ("Follow these steps:", True, False),
        # Without the text around them, a list or a table may go on at either end.
        ("- apples\n- pears", True, True),
        ("| a | b |\n| 1 | 2 |", True, True),
        ("and voles at night.", False, True),
        (", which they swallow whole.", False, True),
        ("Run this:\n```python\nimport owls", True, False),
        ("print(owls)\n```\nThat prints them.", False, True),
        ("```\ncode\n```", False, False),
    ],
)
def test_it_tells_a_passage_cut_mid_thought_from_a_whole_one(text: str, ends_cut: bool, starts_cut: bool) -> None:
    assert ends_mid_thought(text) is ends_cut
    assert starts_mid_thought(text) is starts_cut


@pytest.mark.parametrize(
    ("text", "following", "cut"),
    [
        ("- apples\n- pears", "\n\nFruit is good.", False),
        ("- apples\n- pears", "\n- plums", True),
        ("| 1 | 2 |", "\n\n## Next", False),
        ("| 1 | 2 |", "\n| 3 | 4 |", True),
        ("Follow these steps:", "\n\n- feed the owls", True),
    ],
)
def test_a_list_or_table_that_ends_at_a_blank_line_is_whole(text: str, following: str, cut: bool) -> None:
    assert ends_mid_thought(text, following) is cut


@pytest.mark.parametrize(
    ("preceding", "text", "cut"),
    [
        ("| h | i |\n|---|---|\n", "| 1 | 2 |", True),
        ("Some words.\n\n", "| 1 | 2 |", False),
        ("- apples\n", "- pears", True),
        ("Intro.\n\n", "and more", False),
    ],
)
def test_a_row_or_item_whose_table_or_list_began_before_starts_mid_thought(preceding: str, text: str, cut: bool) -> None:
    assert starts_mid_thought(text, preceding) is cut


def test_a_table_row_is_widened_back_to_the_table_s_header() -> None:
    before = "Sizes of owls:\n\n| owl | cm |\n|---|---|\n| barn | 35 |\n"
    added, _ = widen_before("| snowy | 60 |", before, budget=100)
    assert before[len(before) - added :] == "| owl | cm |\n|---|---|\n| barn | 35 |\n"


def test_widening_after_stops_at_the_first_sentence_end_that_completes_the_thought() -> None:
    added, tokens = widen_after("Owls hunt mice and", " voles at night. Barn owls nest in barns.", budget=100)
    assert added == len(" voles at night.") and 0 < tokens <= 100


def test_widening_after_a_whole_sentence_adds_nothing() -> None:
    assert widen_after("Owls hunt mice.", " Barn owls nest in barns.", budget=100) == (0, 0)


def test_widening_never_goes_over_the_budget() -> None:
    continuation = " voles and shrews along the frozen river banks during the long winter nights."
    assert widen_after("Owls hunt mice and", continuation, budget=3) == (0, 0)


def test_widening_without_a_sentence_end_in_reach_takes_as_many_lines_as_the_budget_allows() -> None:
    added, tokens = widen_after("Steps:", "\n- feed the owls\n- clean the barn\n- count the mice", budget=8)
    assert added == len("\n- feed the owls\n- clean the barn") and tokens <= 8


def test_widening_before_goes_back_to_the_start_of_the_sentence() -> None:
    added, _ = widen_before("hunt mice at night.", "Barn owls are pale. In winter the owls ", budget=100)
    assert added == len("In winter the owls ")


@pytest.fixture
def cut_document(cast: Cast, settings: Settings) -> Document:
    settings.RAG_CHUNK_SIZE, settings.RAG_CHUNK_OVERLAP = 24, 4
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Owls", text=OWLS)
    index_documents(document_ids=[document.pk])
    return document


def chunks_of(document: Document) -> list[Chunk]:
    return list(Chunk.objects.filter(document=document).order_by("chunk_index"))


def passage_of(passages: list[Passage], chunk: Chunk) -> Passage:
    return next(p for p in passages if p.chunk_id == chunk.pk)


def unwidened(passages: list[Passage], chunk: Chunk) -> Passage:
    """The passage of `chunk` as search returned it, before any widening."""
    passage = passage_of(passages, chunk)
    passage.text, passage.start, passage.end = chunk.chunk_text, chunk.start_offset, chunk.end_offset
    return passage


def cut_chunk(document: Document) -> Chunk:
    """The chunk that ends mid-sentence (the indexing really cut one)."""
    cut = [c for c in chunks_of(document) if ends_mid_thought(c.chunk_text)]
    assert cut, [c.chunk_text for c in chunks_of(document)]
    return cut[0]


def test_a_passage_cut_mid_sentence_is_widened_to_the_end_of_its_sentence(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM
) -> None:
    chunk = cut_chunk(cut_document)
    passage = passage_of(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    assert passage.text.endswith("when the snow lies deep.")
    assert passage.end > chunk.end_offset and passage.start <= chunk.start_offset
    assert cut_document.text[passage.start : passage.end] == passage.text, "the widened passage is one exact span"
    assert (passage.chunk_start, passage.chunk_end) == (chunk.start_offset, chunk.end_offset)


def test_the_citation_carries_the_widened_span_and_the_matched_chunk(
    cast: Cast, api_for: ApiFor, cut_document: Document, fake_llm: FakeLLM
) -> None:
    chunk = cut_chunk(cut_document)
    fake_llm.response = "They hunt mice [1]."
    data = api_for(cast.bob).post("rag.answer", {"query": CUT_QUESTION, "limit": 1}).json()["data"]
    (citation,) = data["citations"]
    assert cut_document.text[citation["start"] : citation["end"]] == citation["context"]
    assert (citation["chunkStart"], citation["chunkEnd"]) == (chunk.start_offset, chunk.end_offset)
    assert citation["end"] > citation["chunkEnd"] and citation["context"].endswith("snow lies deep.")
    assert citation["context"] in fake_llm.calls[0][1]["content"], "the LLM read the widened passage"


def test_overlapping_chunks_add_their_overlap_once(cast: Cast, cut_document: Document, fake_llm: FakeLLM) -> None:
    chunk = cut_chunk(cut_document)
    passage = passage_of(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    assert passage.text.count("frozen river banks") == 1


def test_a_passage_that_ends_its_sentence_is_not_widened(cast: Cast, cut_document: Document, fake_llm: FakeLLM) -> None:
    whole = [c for c in chunks_of(cut_document) if not ends_mid_thought(c.chunk_text) and not starts_mid_thought(c.chunk_text)]
    assert whole
    retrieval = retrieve(user=cast.bob, query=whole[0].chunk_text, limit=5)
    passage = passage_of(retrieval.passages, whole[0])
    assert (passage.start, passage.end, passage.text) == (whole[0].start_offset, whole[0].end_offset, whole[0].chunk_text)


def test_a_passage_that_starts_mid_sentence_is_widened_back_to_the_start_of_its_sentence(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM
) -> None:
    starts_cut = [c for c in chunks_of(cut_document) if starts_mid_thought(c.chunk_text)]
    assert starts_cut
    chunk = starts_cut[0]
    passage = passage_of(retrieve(user=cast.bob, query=chunk.chunk_text, limit=1).passages, chunk)
    assert passage.text.startswith("The owls of the northern forest") and passage.end == chunk.end_offset
    assert cut_document.text[passage.start : passage.end] == passage.text


def test_widening_never_crosses_a_heading_even_into_a_section_of_the_same_name(cast: Cast, fake_llm: FakeLLM) -> None:
    text = "# Barn\n\nBarn owls nest in old barns and hunt mice. To feed them:\n\n# Barn\n\nGive them fresh mice daily."
    document = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Barns", text=text)
    index_documents(document_ids=[document.pk])
    first = chunks_of(document)[0]
    assert first.chunk_text.endswith("feed them:") and ends_mid_thought(first.chunk_text)
    passage = passage_of(retrieve(user=cast.bob, query="Barn owls nest in old barns and hunt mice", limit=1).passages, first)
    assert passage.text == first.chunk_text


@pytest.mark.parametrize(("name", "value"), [("RAG_ANSWER_NEIGHBOURS", 0), ("RAG_ANSWER_CONTEXT_TOKENS", 0)])
def test_neighbouring_context_is_off_with_no_neighbours_or_no_budget(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM, settings: Settings, name: str, value: int
) -> None:
    setattr(settings, name, value)
    chunk = cut_chunk(cut_document)
    passage = passage_of(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    assert (passage.start, passage.end, passage.text) == (chunk.start_offset, chunk.end_offset, chunk.chunk_text)


def test_a_small_budget_leaves_a_passage_as_it_was_rather_than_cut_elsewhere(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM, settings: Settings
) -> None:
    settings.RAG_ANSWER_CONTEXT_TOKENS = 2
    chunk = cut_chunk(cut_document)
    passage = passage_of(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    assert passage.text == chunk.chunk_text


def test_widening_reads_nothing_the_asker_cannot_see(cast: Cast, cut_document: Document, fake_llm: FakeLLM) -> None:
    chunk = cut_chunk(cut_document)
    passage = unwidened(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    widen_passages(user=cast.charlie, passages=[passage])  # charlie is in another team
    assert passage.text == chunk.chunk_text, "an invisible document's neighbours are never read"
    Document.objects.filter(pk=cut_document.pk).update(archived_at=cut_document.created_at)
    widen_passages(user=cast.bob, passages=[passage])
    assert passage.text == chunk.chunk_text, "nor those of a document archived since it was ranked"


def test_a_passage_of_an_older_version_is_not_widened_with_the_new_text(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM
) -> None:
    chunk = cut_chunk(cut_document)
    passage = unwidened(retrieve(user=cast.bob, query=CUT_QUESTION, limit=1).passages, chunk)
    Document.objects.filter(pk=cut_document.pk).update(version=cut_document.version + 1, text="Rewritten. " + OWLS)
    widen_passages(user=cast.bob, passages=[passage])
    assert passage.text == chunk.chunk_text


def passage_from(n: int, chunk: Chunk) -> Passage:
    """A passage exactly as search would hand over `chunk`, numbered `n` (1 is the best)."""
    document = chunk.document
    return Passage(
        n=n,
        chunk_id=chunk.pk,
        document_id=document.pk,
        title=document.title,
        url=document.url,
        version=chunk.document_version,
        chunk_index=chunk.chunk_index,
        start=chunk.start_offset,
        end=chunk.end_offset,
        score=1.0 / n,
        similarity=0.5,
        text=chunk.chunk_text,
    )


@pytest.fixture
def two_cut_documents(cast: Cast, cut_document: Document) -> list[Document]:
    hawks = DocumentFactory.create(
        collection=cast.handbook, created_by=cast.alice, title="Hawks", text=OWLS.replace("owl", "hawk")
    )
    index_documents(document_ids=[hawks.pk])
    return [cut_document, hawks]


def test_passages_of_several_documents_are_widened_each_from_its_own_text(
    cast: Cast, two_cut_documents: list[Document], settings: Settings
) -> None:
    passages = [passage_from(n, cut_chunk(document)) for n, document in enumerate(two_cut_documents, start=1)]
    widen_passages(user=cast.bob, passages=passages)
    for passage, document in zip(passages, two_cut_documents, strict=True):
        assert passage.end > passage.chunk_end and document.text[passage.start : passage.end] == passage.text


def test_the_budget_is_shared_by_the_answer_and_spent_on_the_best_passage_first(
    cast: Cast, two_cut_documents: list[Document], settings: Settings
) -> None:
    first = cut_chunk(two_cut_documents[0])
    following = chunks_of(two_cut_documents[0])[first.chunk_index + 1]
    _, needed = widen_after(first.chunk_text, two_cut_documents[0].text[first.end_offset : following.end_offset], 1000)
    settings.RAG_ANSWER_CONTEXT_TOKENS = needed
    passages = [passage_from(n, cut_chunk(document)) for n, document in enumerate(two_cut_documents, start=1)]
    widen_passages(user=cast.bob, passages=passages)
    assert passages[0].end > passages[0].chunk_end, "the best passage got the budget"
    assert (passages[1].start, passages[1].end) == (passages[1].chunk_start, passages[1].chunk_end), "nothing was left"


def test_while_a_new_model_is_built_a_passage_is_widened_from_the_chunks_of_the_model_searched(
    cast: Cast, cut_document: Document, fake_llm: FakeLLM, settings: Settings
) -> None:
    """The team is still searched with the model it was indexed with; the configured one has no chunks yet."""
    settings.RAG_EMBEDDING_MODEL = "a-model-still-being-built"
    chunk = cut_chunk(cut_document)
    passage = passage_from(1, chunk)
    widen_passages(user=cast.bob, passages=[passage])
    assert passage.text.endswith("when the snow lies deep.") and passage.end > chunk.end_offset
