"""Relations read from sentences (subject, the verb phrase, object) and the last names that stand for a person."""

from __future__ import annotations

from rag.answering.passages import Fact, Passage, connecting_facts
from rag.corpus.names import entity_key
from rag.corpus.sentences import sentences
from rag.indexing.graph_extraction import TitleMatcher, read_chunk
from rag.indexing.pipeline import index_documents
from rag.indexing.sentence_facts import StatementReader, surname_aliases
from rag.models import Chunk, Entity, Relation
from tests.factories import DocumentFactory


def statements(text: str, *, title: str, titles: tuple[str, ...] = ()) -> set[tuple[str, str, str]]:
    facts = read_chunk(
        text,
        [],
        own_key=entity_key(title),
        matcher=TitleMatcher({entity_key(t): t for t in titles}),
        linked_titles={},
        own_title=title,
    )
    return set(facts.statements)


def test_sentences_end_at_their_stops_but_not_at_initials_or_abbreviations():
    text = "J. R. Smith moved to St. Louis in 1990. He died there!\nA new line starts one. Dr. Who? Yes."
    assert sentences(text) == [
        "J. R. Smith moved to St. Louis in 1990.",
        "He died there!",
        "A new line starts one.",
        "Dr. Who?",
        "Yes.",
    ]


def test_a_sentence_relates_its_subject_to_each_name_by_the_words_before_it():
    text = (
        "Altid ballade is a 1955 Danish drama film directed by Gabriel Axel. "
        "Sigrid Horne-Rasmussen received a Bodil Award for Best Actress."
    )
    found = statements(text, title="Altid ballade", titles=("Gabriel Axel",))
    assert ("altid ballade", "drama film directed by", "gabriel axel") in found
    assert ("sigrid horne rasmussen", "received", "bodil award") in found
    # "for" says nothing: Best Actress is named, but not stated to be related to anyone.
    assert not any(target == "best actress" for _, _, target in found)


def test_a_sentence_that_opens_with_a_pronoun_or_its_verb_is_about_the_documents_subject():
    text = (
        "He was born in Los Angeles, California and studied at Long Island University. "
        "Directed by Jim Wynorski, it starred Dick Durock."
    )
    found = statements(text, title="Someone (director)")
    assert ("someone director", "was born in", "los angeles") in found
    assert ("someone director", "studied at", "long island university") in found, "the clause after 'and' has its own verb"
    assert ("someone director", "directed by", "jim wynorski") in found


def test_a_list_of_names_shares_its_predicate_and_a_short_title_opens_a_sentence_about_its_document():
    text = "Ed Wood is a 1994 film starring Johnny Depp, Martin Landau, and Sarah Jessica Parker."
    found = statements(text, title="Ed Wood (film)")
    assert {target for source, predicate, target in found if source == "ed wood film" and predicate == "is a film starring"} == {
        "johnny depp",
        "martin landau",
        "sarah jessica parker",
    }
    assert not any(source == "ed wood" for source, _, _ in found), "the film's page names the film, not the man"


def test_a_last_name_alone_is_the_person_named_in_full_unless_two_share_it():
    text = "Jim Wynorski met Ann Wynorski and Gabriel Axel. Axel directed films; Wynorski wrote them."
    assert surname_aliases(text, ["Jim Wynorski", "Ann Wynorski", "Gabriel Axel"]) == {"axel": ("gabriel axel", 1)}
    assert surname_aliases("Gabriel Axel, then axel in lower case.", ["Gabriel Axel"]) == {}
    assert surname_aliases("Victor Sjöström directed it; Sjöström also acted.", ["Victor Sjöström"]) == {
        "sjostrom": ("victor sjostrom", 1)
    }, "accents and all"
    facts = read_chunk(
        "Gabriel Axel was born in Aarhus. Axel directed Babette's Feast.",
        [],
        own_key="x",
        matcher=TitleMatcher({"babette s feast": "Babette's Feast"}),
        linked_titles={},
    )
    assert facts.mentions["gabriel axel"][2] == 2, "the last name counts as a mention of the full name"
    assert ("gabriel axel", "directed", "babette s feast") in facts.statements


def test_names_next_to_each_other_or_without_a_subject_relate_nothing():
    assert StatementReader("In 1990 Gabriel Axel met Jim Wynorski.", {"gabriel axel": "gabriel axel"}, None).statements() == []
    assert (
        StatementReader(
            "Gabriel Axel Jim Wynorski.", {"gabriel axel": "gabriel axel", "jim wynorski": "jim wynorski"}, None
        ).statements()
        == []
    )


def test_indexing_writes_the_stated_relation_with_its_words_as_the_predicate(cast):
    film = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="The Organization (Film)",
        text="The Organization is a 1971 thriller directed by Don Medford. It starred Sidney Poitier.",
    )
    DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Don Medford", text="A director.")
    index_documents(document_ids=[film.pk])
    stated = Relation.objects.filter(document_id=film.pk).exclude(predicate__in=["MENTIONS", "LINKS_TO", "CO_OCCURS"])
    by_target = {Entity.objects.get(pk=r.target_id).key: (r.predicate, r.source_id) for r in stated}
    own = Entity.objects.get(team=cast.alice.team, key="the organization film").pk
    assert by_target["don medford"] == ("thriller directed by", own), "numbers are not part of a predicate"
    assert by_target["sidney poitier"] == ("starred", own)


def test_an_answers_facts_give_each_linked_passage_once_in_the_words_its_sentence_states(cast):
    """What an LLM is told links the passages: "directed by", not MENTIONS, and each pair once (a name that is
    also a title has a relation of each kind)."""
    film = DocumentFactory.create(
        collection=cast.handbook,
        created_by=cast.alice,
        title="The Organization (Film)",
        text="The Organization is a 1971 thriller directed by Don Medford.",
    )
    director = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Don Medford", text="A director.")
    index_documents(document_ids=[director.pk, film.pk])
    passages = [
        Passage(
            n=n,
            chunk_id=chunk.pk,
            document_id=chunk.document_id,
            title=chunk.document.title,
            url="",
            version=1,
            chunk_index=0,
            start=0,
            end=len(chunk.chunk_text),
            score=1.0,
            similarity=1.0,
            text=chunk.chunk_text,
        )
        for n, chunk in enumerate(Chunk.objects.filter(document__in=[film, director]).order_by("document__title"), start=1)
    ]
    assert Relation.objects.filter(document_id=film.pk, predicate="MENTIONS").exists()
    assert connecting_facts(passages) == [
        Fact(n=2, source="The Organization (Film)", predicate="thriller directed by", target="Don Medford", target_n=1)
    ]
