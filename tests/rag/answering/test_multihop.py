"""Extractive answers that follow the graph: answer types, spans, bridge paths, comparisons and honest confidence.

Hand-made documents only (a small film archive), judged by words alone (no sentence model), so each
rule shows on its own.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from rag.answering.answer_types import AnswerType, read_question, relation_span
from rag.answering.confidence import Evidence, answer_support, assess_confidence
from rag.answering.extractive import Extract, extract
from rag.answering.passages import Fact, Passage, short_title_facts
from rag.corpus.names import short_title

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def passage(n: int, title: str, text: str) -> Passage:
    body = f"# {title}\n\n{text}"
    return Passage(
        n=n,
        chunk_id=n,
        document_id=uuid.UUID(int=n),
        title=title,
        url=f"/doc/{n}",
        version=1,
        chunk_index=0,
        start=0,
        end=len(body),
        score=1.0,
        similarity=0.9,
        text=body,
    )


ARCHIVE = [
    passage(1, "Night Train", "Night Train is a 1998 Norwegian drama film. It was directed by Vera Lind."),
    passage(2, "Harbour", "Harbour is a 2001 film directed by Ola Berg."),
    passage(3, "Vera Lind", "Vera Lind (3 May 1950 – 12 June 2004) was a Norwegian director. She was born in Bergen, Norway."),
    passage(4, "Ola Berg", "Ola Berg (born 1961 in Uppsala, Sweden) is a Swedish director and actor."),
]
FACTS = [
    Fact(n=1, source="Night Train", predicate="MENTIONS", target="Vera Lind", target_n=3),
    Fact(n=2, source="Harbour", predicate="MENTIONS", target="Ola Berg", target_n=4),
]


def answer(question: str, passages: list[Passage] = ARCHIVE, facts: list[Fact] = FACTS) -> Extract:
    return extract(question, passages, facts=facts, similarity=lambda q, texts: None)


@pytest.mark.parametrize(
    ("question", "kind", "relation"),
    [
        ("When did the director of Night Train die?", AnswerType.DATE, "death"),
        ("What is the date of birth of Vera Lind?", AnswerType.DATE, "birth"),
        ("In what year was the company founded?", AnswerType.DATE, "founding"),
        ("Where was the director of Harbour born?", AnswerType.PLACE, "birth"),
        ("What nationality is Ola Berg?", AnswerType.PLACE, "nationality"),
        ("Which country is the composer of Harbour from?", AnswerType.PLACE, "nationality"),
        ("Who directed Night Train?", AnswerType.PERSON, None),
        ("Who is the mother of Vera Lind?", AnswerType.PERSON, None),
        ("How many films did Vera Lind direct?", AnswerType.NUMBER, None),
        ("Is the office open on Sundays?", AnswerType.YES_NO, None),
        ("Why is the sky blue?", AnswerType.OTHER, None),
        ("What is the name of the bridge in the town where Vera Lind was born?", AnswerType.OTHER, "birth"),
    ],
)
def test_the_expected_answer_type_comes_from_the_wh_word_and_the_head_noun(
    question: str, kind: AnswerType, relation: str | None
) -> None:
    read = read_question(question)
    assert (read.type, read.relation, read.sides) == (kind, relation, ())


@pytest.mark.parametrize(
    ("question", "sides", "order"),
    [
        ("Who was born first, Vera Lind or Ola Berg?", ("Vera Lind", "Ola Berg"), "earlier"),
        ("Which film came out more recently, Night Train or Harbour?", ("Night Train", "Harbour"), "later"),
        ("Was Vera Lind or Ola Berg born first?", ("Vera Lind", "Ola Berg"), "earlier"),
        ("Are Vera Lind and Ola Berg of the same nationality?", ("Vera Lind", "Ola Berg"), "same"),
        ("Do both films Night Train and Harbour have the directors from the same country?", ("Night Train", "Harbour"), "same"),
        ("Which film came out first, Bread And Roses or Harbour?", ("Bread And Roses", "Harbour"), "earlier"),
    ],
)
def test_a_comparison_names_its_sides_and_how_it_picks(question: str, sides: tuple[str, str], order: str) -> None:
    read = read_question(question)
    assert (read.sides, read.order) == (sides, order)


@pytest.mark.parametrize(
    ("sentence", "question", "span"),
    [
        ("Vera Lind (3 May 1950 – 12 June 2004) was a director.", "When did Vera Lind die?", "12 June 2004"),
        ("Vera Lind (3 May 1950 – 12 June 2004) was a director.", "When was Vera Lind born?", "3 May 1950"),
        ("Ola Berg (born March 4, 1961 in Uppsala, Sweden) acts.", "Where was Ola Berg born?", "Uppsala, Sweden"),
        ("He died in Paris after he was born in Lyon.", "Where did he die?", "Paris"),
        ("Ola Berg is a Swedish director.", "What nationality is Ola Berg?", "Swedish"),
        ("The film was directed by Vera Lind.", "Who directed the film?", "Vera Lind"),
        ("The archive holds 1,200 reels of film.", "How many reels does the archive hold?", "1,200 reels"),
    ],
)
def test_the_span_is_the_one_the_relation_asks_for(sentence: str, question: str, span: str) -> None:
    assert relation_span(sentence, read_question(question), exclude=question) == span


def test_the_answer_follows_the_bridge_from_the_named_film_to_its_directors_page() -> None:
    made = answer("When did the director of Night Train die?")
    lines = made.text.splitlines()
    assert lines[0] == "From your documents: 12 June 2004 [3]."
    assert lines[2:4] == [
        "- It was directed by Vera Lind. [1]",
        "- Vera Lind (3 May 1950 – 12 June 2004) was a Norwegian director. [3]",
    ], "the sentence naming the director, then the director's own, each cited"
    assert (made.method, made.hops, made.roles_held, made.relation_held) == ("path", 2, True, True)
    born = answer("Where was the director of Night Train born?")
    assert born.lead == "Bergen, Norway [3]."
    assert "Harbour" not in born.text and "Ola Berg" not in born.text


def test_without_the_bridge_the_directors_page_is_not_reached() -> None:
    alone = [ARCHIVE[0], passage(2, "Ola Berg", "Ola Berg died on 3 March 2010 in Uppsala.")]
    made = answer("When did the director of Night Train die?", alone, facts=[])
    assert "2010" not in (made.lead or ""), "nothing connects Night Train to Ola Berg"
    assert not (made.lead and made.roles_held)


@pytest.mark.parametrize(
    ("title", "short"),
    [
        ("Michael Davis (director)", "Michael Davis"),
        ("Brown County, Kansas", "Brown County"),
        ("Bogislaw IV, Duke of Pomerania", "Bogislaw IV"),
        ("Night Train", None),  # no qualifier
        ("Genomic imprinting in development, growth, behavior and stem cells.", None),  # a phrase with commas
        ("Candida albicans, a distinctive fungal model for cellular aging study", None),
        ("the mill (disambiguation)", None),  # not a name
    ],
)
def test_a_qualified_titles_short_form_is_the_name_before_its_qualifier(title: str, short: str | None) -> None:
    assert short_title(title) == short


EIGHT_DAYS = [
    passage(1, "Eight Days a Week (film)", "Eight Days a Week is a 1997 comedy film written and directed by Michael Davis."),
    passage(2, "Michael Davis (director)", "Michael Davis (born 1961 in Rockville, Maryland) is an American director."),
]


def test_a_passage_naming_anothers_document_by_its_short_title_is_a_bridge_the_answer_follows() -> None:
    facts = short_title_facts(EIGHT_DAYS, [])
    assert facts == [Fact(n=1, source="Eight Days a Week (film)", predicate="MENTIONS", target="Michael Davis", target_n=2)]
    made = answer("Where was the director of film Eight Days A Week born?", EIGHT_DAYS, facts=facts)
    assert made.lead == "Rockville, Maryland [2]." and (made.method, made.hops) == ("path", 2)
    assert "[1]" in made.text, "the sentence naming the director is quoted too"
    # Without the link the director's page is not reached.
    assert "Rockville" not in (answer("Where was the director of film Eight Days A Week born?", EIGHT_DAYS, facts=[]).lead or "")


def test_a_short_title_two_documents_share_or_that_is_a_whole_title_links_nothing() -> None:
    shared = [*EIGHT_DAYS, passage(3, "Michael Davis (footballer)", "Michael Davis played for Leeds.")]
    assert short_title_facts(shared, []) == []
    whole = [*EIGHT_DAYS, passage(3, "Michael Davis", "Michael Davis is a common name.")]
    assert short_title_facts(whole, []) == []
    # A link the graph already made is not made twice.
    known = [Fact(n=1, source="Eight Days a Week (film)", predicate="MENTIONS", target="Michael Davis (director)", target_n=2)]
    assert short_title_facts(EIGHT_DAYS, known) == []


def test_a_comparison_quotes_each_sides_fact_and_states_which_comes_first() -> None:
    made = answer("Who was born first, Vera Lind or Ola Berg?")
    assert made.lead == "Vera Lind (3 May 1950 [3], against 1961 [4] for Ola Berg)."
    assert "- Vera Lind (3 May 1950 – 12 June 2004) was a Norwegian director. [3]" in made.text
    assert "- Ola Berg (born 1961 in Uppsala, Sweden) is a Swedish director and actor. [4]" in made.text
    later = answer("Which film has the director born later, Night Train or Harbour?")
    assert later.lead is not None and later.lead.startswith("Harbour (1961 [4], against 3 May 1950 [3] for Night Train)")
    assert later.hops == 2, "each side's fact is its director's, one hop from the film"


def test_a_same_country_question_says_yes_or_no_only_for_places_of_the_same_kind() -> None:
    assert answer("Are Vera Lind and Ola Berg of the same nationality?").lead == "No: Norwegian [3], Swedish [4]."
    twins = [*ARCHIVE[:3], passage(4, "Ola Berg", "Ola Berg is a Norwegian actor.")]
    assert answer("Are Vera Lind and Ola Berg of the same nationality?", twins).lead == "Yes: both Norwegian [3][4]."
    unlike = [*ARCHIVE[:2], passage(3, "Vera Lind", "Vera Lind is a director."), passage(4, "Ola Berg", "He acts in Oslo.")]
    made = answer("Are Vera Lind and Ola Berg from the same country?", unlike)
    assert made.lead is None, "no nationality on one side: nothing to compare"


def test_dates_that_do_not_tell_two_sides_apart_are_quoted_but_not_compared() -> None:
    same_year = [
        passage(1, "Vera Lind", "Vera Lind was born in 1950 in Bergen."),
        passage(2, "Ola Berg", "Ola Berg was born in May 1950 in Uppsala."),
    ]
    made = answer("Who was born first, Vera Lind or Ola Berg?", same_year, facts=[])
    assert made.lead is None and made.method == "comparison-facts"
    assert "[1]" in made.text and "[2]" in made.text


def confidence(made: Extract, similarity: float = 0.9) -> str:
    evidence = [Evidence(similarity, uuid.UUID(int=1), NOW), Evidence(similarity, uuid.UUID(int=2), NOW)]
    assessment = assess_confidence(evidence, threshold=0.25, stale_after_days=365, now=NOW)
    return str(answer_support(assessment, made.support()).level)


def test_only_an_answer_along_the_questions_path_is_high() -> None:
    assert confidence(answer("When did the director of Night Train die?")) == "high"
    assert confidence(answer("Who was born first, Vera Lind or Ola Berg?")) == "high"
    no_lead = answer("Why did Vera Lind make Night Train?")
    assert no_lead.lead is None and confidence(no_lead) == "medium"


def test_a_keyword_stuffed_note_never_reaches_high() -> None:
    note = passage(
        1,
        "Night Train director",
        "Night Train director died died died when director Night Train death date director Night Train died in 2004.",
    )
    made = answer("When did the director of Night Train die?", [note], facts=[])
    assert made.stuffed
    assert confidence(made) == "low", "similar words, yet no sentence states the relation between two things"
    assert confidence(answer("When did the director of Night Train die?", [note, ARCHIVE[1]], facts=[])) != "high"


def test_a_comparison_whose_first_side_leads_nowhere_still_quotes_both_sides() -> None:
    """Harbour's passage names no director the passages hold: nothing to compare, but the answer to "A or B?"
    still says what each side's passage says, not only the side that led somewhere."""
    unlinked = [*ARCHIVE[:1], passage(2, "Harbour", "Harbour is a 2001 film about a port."), ARCHIVE[2]]
    made = answer("Which film has the director born later, Harbour or Night Train?", unlinked, facts=FACTS[:1])
    assert made.lead is None and made.method == "comparison-facts"
    assert "- Harbour is a 2001 film about a port. [2]" in made.text
    assert "It was directed by Vera Lind. [1]" in made.text and "[3]" in made.text


def test_a_sentence_runs_on_past_an_initial_and_names_its_bridge_whole() -> None:
    """ "Directed by Herman C. Raymaker" is one sentence: cut at "C.", it would name no one the passages hold."""
    archive = [
        passage(1, "The Alster Case", "The Alster Case is a 1915 film directed by Herman C. Raymaker. It is lost."),
        passage(2, "Herman C. Raymaker", "Herman C. Raymaker (January 22, 1893 – March 6, 1944) was an American director."),
    ]
    facts = [Fact(n=1, source="The Alster Case", predicate="MENTIONS", target="Herman C. Raymaker", target_n=2)]
    made = answer("When did the director of film The Alster Case die?", archive, facts)
    assert "- The Alster Case is a 1915 film directed by Herman C. Raymaker. [1]" in made.text
    assert made.lead == "March 6, 1944 [2]."


def test_a_paternal_grandfather_is_the_fathers_father_two_pages_away() -> None:
    family = [
        passage(1, "Eberhard of Limburg", "Eberhard of Limburg (died 1426) was the son of Dietrich of Limburg and Anna of Wied."),
        passage(2, "Dietrich of Limburg", "Dietrich of Limburg (died 1400) was the son of Johann of Limburg and Maria of Mark."),
        passage(3, "Anna of Wied", "Anna of Wied was the daughter of Wilhelm of Wied."),
    ]
    facts = [
        Fact(n=1, source="Eberhard of Limburg", predicate="MENTIONS", target="Dietrich of Limburg", target_n=2),
        Fact(n=1, source="Eberhard of Limburg", predicate="MENTIONS", target="Anna of Wied", target_n=3),
    ]
    made = answer("Who is the paternal grandfather of Eberhard of Limburg?", family, facts)
    assert made.lead == "Johann of Limburg [2]."
    assert made.hops == 2
    in_law = [
        passage(1, "Ada Berg", "Ada Berg was married to Per Holm."),
        passage(2, "Per Holm", "Per Holm was the son of Nils Holm, a sea captain."),
    ]
    facts = [Fact(n=1, source="Ada Berg", predicate="MENTIONS", target="Per Holm", target_n=2)]
    assert answer("Who is Ada Berg's father-in-law?", in_law, facts).lead == "Nils Holm [2]."
