"""The knowledge graph's facts: what the rules read from a chunk, and how facts follow chunks through edits."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from documents.models import Document
from permissions.models import Access
from rag.corpus.names import entity_key
from rag.indexing.graph_extraction import MAX_ENTITIES_PER_CHUNK, TitleMatcher, delete_orphan_entities, read_chunk
from rag.indexing.pipeline import index_documents, title_changed
from rag.models import Chunk, Entity, EntityKind, Mention, Relation
from rag.providers.embeddings import get_embedding_provider
from rag.retrieval.search import search
from tests.factories import CollectionFactory, DocumentFactory

MODEL = "fake-embedding"


def matcher(*titles: str) -> TitleMatcher:
    return TitleMatcher({entity_key(t): t for t in titles})


def test_names_are_normalised_whatever_the_script_and_punctuation():
    assert entity_key("Hermann II, Landgrave of Hesse") == "hermann ii landgrave of hesse"
    assert entity_key("  Ünïcode — ＦＵＬＬＷＩＤＴＨ  ") == "unicode fullwidth"
    assert entity_key("Amélie") == entity_key("AMELIE") == "amelie", "case and a Latin letter's accents name nothing apart"
    assert entity_key("東京タワー") == "東京タワー"
    assert entity_key("ダンス") == "ダンス", "a kana's voicing mark is part of the letter"
    assert entity_key("!!! ... ???") == ""
    assert len(entity_key("word " * 1000)) <= 200


def test_the_rules_read_titles_links_names_code_and_headings():
    text = (
        "Deploys run through the Release Train and [[Rollback Guide]]. See [the runbook](/doc/00000000-0000-0000-0000-000000000001). "
        "Grace Hopper wrote the `deploy.sh` script; the release train never stops."
    )
    facts = read_chunk(
        text,
        ["Operations"],
        own_key=entity_key("Deploying"),
        matcher=matcher("Release Train", "Deploying"),
        linked_titles={"00000000-0000-0000-0000-000000000001": "Runbook"},
    )
    kinds = {key: kind for key, (_, kind, _) in facts.mentions.items()}
    assert kinds["release train"] == EntityKind.DOCUMENT
    # "Release Train" is a proper name once; the lower-case one is found only as a title, which may be private.
    assert facts.mentions["release train"][2] == 1, "a name's count is its own words', whatever titles exist"
    assert not facts.title_only("release train")
    assert kinds["rollback guide"] == EntityKind.NAME and "rollback guide" in facts.links
    assert kinds["runbook"] == EntityKind.DOCUMENT and "runbook" in facts.links
    assert kinds["grace hopper"] == EntityKind.NAME
    assert kinds["deploy sh"] == EntityKind.CODE
    assert kinds["operations"] == EntityKind.TOPIC
    assert "deploying" not in facts.mentions, "a document does not mention itself"


def test_each_mention_records_its_own_chunks_spelling_and_the_kind_its_words_give(cast):
    """What a reader is shown of an entity comes from these: never another chunk's spelling, never a title's kind."""
    DocumentFactory(collection=cast.private, created_by=cast.alice, title="Grace Hopper", text="A biography.")
    DocumentFactory(collection=cast.private, created_by=cast.alice, title="Night Crew", text="The crew's page.")
    memo = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Memo",
        text="GraCE Hopper wrote `release_train` for the night crew. Grace Hopper retired.",
    )
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    mentions = {
        key: (name, kind, title_only)
        for key, name, kind, title_only in Mention.objects.filter(document_id=memo.pk).values_list(
            "entity__key", "name", "kind", "title_only"
        )
    }
    assert mentions == {
        "memo": ("Memo", EntityKind.DOCUMENT, False),  # its subject: the document's title
        "grace hopper": ("GraCE Hopper", EntityKind.NAME, False),  # the first spelling, a name though also a title
        "release train": ("release_train", EntityKind.CODE, False),
        "night crew": ("Night Crew", EntityKind.DOCUMENT, True),  # only a title: never shown as a spelling
    }


def test_a_title_is_found_anywhere_in_a_long_chunk_not_only_at_its_start():
    text = "Filler words about other things. " * 60 + "The Release Train leaves at noon."
    facts = read_chunk(text, [], own_key="x", matcher=matcher("Release Train"), linked_titles={})
    assert facts.mentions["release train"][1] == EntityKind.DOCUMENT


def test_a_proper_name_never_spans_lines():
    facts = read_chunk("# Deploying the API\n\nDeployments run daily.", [], own_key="x", matcher=matcher(), linked_titles={})
    assert all("\n" not in name for name, _, _ in facts.mentions.values())
    assert "deploying the api" in facts.mentions


def test_a_chunk_full_of_links_writes_a_bounded_number_of_facts():
    text = " ".join(f"[[Page {i} Name]]" for i in range(5000))
    facts = read_chunk(text, [], own_key="x", matcher=matcher(), linked_titles={})
    assert len(facts.mentions) == MAX_ENTITIES_PER_CHUNK


def test_empty_and_punctuation_titles_name_nothing():
    facts = read_chunk("... --- !!!", ["###"], own_key="", matcher=matcher("...", "!!!"), linked_titles={})
    assert facts.mentions == {}


def test_only_what_a_title_alone_made_a_mention_is_flagged_title_only():
    text = "The release train and [[Rollback Guide]] and Grace Hopper. See [x](/doc/00000000-0000-0000-0000-000000000001)."
    facts = read_chunk(
        text,
        [],
        own_key="x",
        matcher=matcher("Release Train", "Rollback Guide", "Grace Hopper"),
        linked_titles={"00000000-0000-0000-0000-000000000001": "Runbook"},
    )
    assert {key for key in facts.mentions if facts.title_only(key)} == {"release train", "runbook"}
    assert facts.mentions["grace hopper"][1] == EntityKind.DOCUMENT, "kind is the entity's; who may see it is the query's"


def test_titles_change_neither_the_names_their_counts_nor_their_co_occurrence():
    """Which titles exist (some of them private) must not change what the chunk's own words name."""
    text = "Grace Hopper met Alan Turing. Grace Hopper wrote [[Rollback Guide]] at the release train. " + " ".join(
        f"Person Number{i}" for i in range(MAX_ENTITIES_PER_CHUNK)
    )

    def named(facts):
        names = {key: value for key, value in facts.mentions.items() if not facts.title_only(key)}
        pairs = [pair for pair in facts.cooccurring() if not any(facts.title_only(key) for key in pair)]
        return names, pairs

    titles = matcher(*(f"Title {i}" for i in range(100)), "Grace Hopper", "Rollback Guide", "Release Train", "Person Number3")
    alone = read_chunk(text, [], own_key="x", matcher=matcher(), linked_titles={})
    with_titles = read_chunk(
        text + " " + " ".join(f"title {i}" for i in range(100)), [], own_key="x", matcher=titles, linked_titles={}
    )
    without_extra_text = read_chunk(text, [], own_key="x", matcher=titles, linked_titles={})
    assert named(without_extra_text)[0].keys() == named(alone)[0].keys()
    assert {k: v[2] for k, v in named(without_extra_text)[0].items()} == {k: v[2] for k, v in named(alone)[0].items()}
    assert named(without_extra_text)[1] == named(alone)[1]
    assert named(with_titles)[0].keys() == named(alone)[0].keys(), "a hundred titles crowd out no name"
    assert "release train" in without_extra_text.mentions and without_extra_text.title_only("release train")
    assert ("release train", "grace hopper") in without_extra_text.cooccurring()


def relations_of(document) -> set[tuple[str, str, str]]:
    rows = Relation.objects.filter(document_id=document.pk, model_id=MODEL).exclude(predicate="CO_OCCURS")
    names = dict(Entity.objects.values_list("id", "name"))
    return {(names[r.source_id], r.predicate, names[r.target_id]) for r in rows}


def test_indexing_writes_a_relation_to_each_document_a_chunk_names(cast):
    beta = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Beta Service", text="Beta serves traffic.")
    alpha = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha calls the Beta Service for every request."
    )
    index_documents(document_ids=[beta.pk, alpha.pk])
    assert ("Alpha", "MENTIONS", "Beta Service") in relations_of(alpha)
    subject = Mention.objects.get(document_id=alpha.pk, subject=True)
    assert Entity.objects.get(pk=subject.entity_id).name == "Alpha"
    assert Mention.objects.filter(document_id=beta.pk, subject=True, entity__key="beta service").exists()


def test_facts_go_with_their_chunks_when_the_text_changes(cast):
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Beta Service", text="Beta.")
    alpha = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha calls the Beta Service.")
    index_documents(document_ids=[alpha.pk])
    assert relations_of(alpha)
    alpha.text, alpha.version = "Alpha works alone now.", alpha.version + 1
    alpha.save()
    index_documents(document_ids=[alpha.pk])
    assert relations_of(alpha) == set()
    assert not Mention.objects.filter(document_id=alpha.pk, document_version=1).exists()


def test_a_document_added_later_is_linked_to_earlier_chunks_without_embedding_them_again(cast):
    alpha = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha calls the gamma gateway for payments."
    )
    index_documents(document_ids=[alpha.pk])
    assert ("Alpha", "MENTIONS", "Gamma Gateway") not in relations_of(alpha), "no such document yet"
    provider = get_embedding_provider()
    provider.calls.clear()
    gamma = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Gamma Gateway", text="The gateway.")
    index_documents(document_ids=[gamma.pk])
    embedded = [text for call in provider.calls for text in call]
    assert all("Alpha calls" not in text for text in embedded), "alpha's chunk is not embedded again"
    assert ("Alpha", "MENTIONS", "Gamma Gateway") in relations_of(alpha)
    target = Entity.objects.get(key="gamma gateway")
    assert Mention.objects.filter(entity=target, subject=True, document_id=gamma.pk).exists()


def test_a_rename_makes_the_document_the_subject_of_its_new_title(cast):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Old Name", text="Some text about things.")
    reader = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Reader", text="Reader depends on the New Name service."
    )
    index_documents(document_ids=[doc.pk, reader.pk])
    doc.title = "New Name"
    doc.save()
    title_changed(doc.pk)
    subject = Mention.objects.get(document_id=doc.pk, subject=True)
    assert Entity.objects.get(pk=subject.entity_id).key == "new name"
    assert ("Reader", "MENTIONS", "New Name") in relations_of(reader)


def test_cleanup_removes_entities_no_chunk_names_any_more(cast):
    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Lonely", text="Talks about Grace Hopper.")
    index_documents(document_ids=[doc.pk])
    assert Entity.objects.filter(key="grace hopper").exists()
    Chunk.objects.filter(document=doc).delete()
    assert delete_orphan_entities() >= 2
    assert not Entity.objects.filter(key__in=["grace hopper", "lonely"]).exists()


def test_the_admin_lists_a_documents_relations(cast, client):
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Beta Service", text="Beta.")
    alpha = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha calls the Beta Service.")
    index_documents(document_ids=[alpha.pk])
    cast.alice.is_staff = cast.alice.is_superuser = True
    cast.alice.save()
    client.force_login(cast.alice)
    listing = client.get(f"/admin/rag/relation/?document_id={alpha.pk}")
    assert listing.status_code == 200
    assert b"Beta Service" in listing.content and b"MENTIONS" in listing.content
    assert f"/admin/rag/relation/?document_id={alpha.pk}".encode() in client.get("/admin/documents/document/").content


def test_reconcile_finds_and_restores_missing_graph_facts_without_embedding(cast, capsys):
    from django.core.management import call_command

    doc = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha talks to Grace Hopper.")
    index_documents(document_ids=[doc.pk])
    Mention.objects.filter(document_id=doc.pk).delete()
    Relation.objects.filter(document_id=doc.pk).delete()
    call_command("reconcile_index")
    assert "1 without graph facts" in capsys.readouterr().out
    provider = get_embedding_provider()
    provider.calls.clear()
    call_command("reconcile_index", "--fix")
    assert Mention.objects.filter(document_id=doc.pk, subject=True).exists()
    assert provider.calls == [], "facts are read again from the chunks; nothing is embedded"


def test_index_documents_graph_reads_the_facts_again_without_embedding(cast, capsys):
    """After an upgrade whose migration could only guess (0014 flags every title-entity mention), the command
    reads the precise facts again from the chunks: nothing embedded, the search index untouched."""
    beta = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Beta Service", text="Beta serves traffic.")
    alpha = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Alpha", text="Alpha calls the beta service. Grace Hopper agrees."
    )
    index_documents(document_ids=[beta.pk, alpha.pk])
    precise = sorted(Mention.objects.values_list("chunk_id", "entity_id", "count", "subject", "title_only"))
    relations = sorted(Relation.objects.values_list("chunk_id", "source_id", "target_id", "predicate", "target_title_only"))
    Mention.objects.filter(subject=False).update(title_only=True)  # as the migration leaves them
    Relation.objects.filter(predicate="CO_OCCURS").delete()
    chunks = sorted(Chunk.objects.values_list("id", "content_hash"))
    provider = get_embedding_provider()
    provider.calls.clear()

    call_command("index_documents", "--graph")

    assert "Read the graph facts of 2 document(s) again" in capsys.readouterr().out
    assert sorted(Mention.objects.values_list("chunk_id", "entity_id", "count", "subject", "title_only")) == precise
    assert (
        sorted(Relation.objects.values_list("chunk_id", "source_id", "target_id", "predicate", "target_title_only")) == relations
    )
    assert sorted(Chunk.objects.values_list("id", "content_hash")) == chunks and provider.calls == []
    assert Mention.objects.filter(title_only=True).exists() and Mention.objects.filter(subject=False, title_only=False).exists()


def test_index_documents_graph_refuses_options_it_does_not_take(cast):
    with pytest.raises(CommandError, match="--graph reads facts"):
        call_command("index_documents", "--graph", "--force")


def test_a_name_that_is_also_a_title_weighs_more_only_for_those_who_may_know_the_title(cast):
    DocumentFactory(collection=cast.private, created_by=cast.alice, title="Grace Hopper", text="A biography.")
    memo = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Memo", text="Grace Hopper wrote the compiler.")
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    edges = sorted(
        Relation.objects.filter(document_id=memo.pk, target__key="grace hopper", source__key="memo").values_list(
            "weight", "target_title_only"
        )
    )
    assert edges == [(1.0, False), (1.0, True)], "the name's own edge, and the title's, flagged"
    assert Mention.objects.get(document_id=memo.pk, entity__key="grace hopper").title_only is False


def test_a_sentences_opening_words_are_not_part_of_a_proper_name():
    text = "In Arabidopsis the gene is silent. However Grace Hopper disagreed. Is Required For Growth. The Hague ruled."
    facts = read_chunk(text, [], own_key="x", matcher=matcher(), linked_titles={})
    names = {key for key, (_, kind, _) in facts.mentions.items() if kind == EntityKind.NAME}
    assert names == {"grace hopper", "required for growth", "the hague"}


def test_a_title_cased_heading_is_a_topic_not_a_run_of_names():
    heading = "# Increased Risk Of Diabetes By The Age Of 14 Years"
    text = f"{heading}\nGrace Hopper worked at Yale University with Howard Aiken."
    facts = read_chunk(text, [heading], own_key="x", matcher=matcher(), linked_titles={})
    names = {key for key, (_, kind, _) in facts.mentions.items() if kind == EntityKind.NAME}
    topics = {key for key, (_, kind, _) in facts.mentions.items() if kind == EntityKind.TOPIC}
    # "The Age" was read from such headings, and a question saying "by the age of 14" then named it.
    assert names == {"grace hopper", "yale university", "howard aiken"}
    assert topics == {"increased risk of diabetes by the age of 14 years"}
    # A heading in sentence case, or a short one, still names people.
    facts = read_chunk("## Grace Hopper at Yale\nText.", [], own_key="x", matcher=matcher(), linked_titles={})
    assert "grace hopper" in facts.mentions


def collections_of_facts(document) -> set:
    return set(Mention.objects.filter(document_id=document.pk).values_list("collection_id", flat=True)) | set(
        Relation.objects.filter(document_id=document.pk).values_list("collection_id", flat=True)
    )


def graph_titles(user, query: str) -> list[str]:
    result = search(user=user, query=query, mode="graph", limit=10)
    return [result.documents[h.document_id].title for h in result.hits if h.document_id in result.documents]


def test_graph_facts_carry_the_collection_and_follow_a_document_that_moves(cast):
    """A hop reads only the readable collections' facts: a move must move them too."""
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owl Survey", text="The survey counts barn owls.")
    field_notes = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Field Notes", text="Field Notes of the Owl Survey in May."
    )
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    assert collections_of_facts(field_notes) == {cast.private.pk}
    assert "Field Notes" not in graph_titles(cast.bob, "What did the Owl Survey find?"), "bob cannot read the private collection"

    # A move as the admin makes it (a plain save of the collection), no reindexing.
    field_notes.collection = cast.handbook
    field_notes.save()
    assert collections_of_facts(field_notes) == {cast.handbook.pk}
    assert "Field Notes" in graph_titles(cast.bob, "What did the Owl Survey find?")

    # And back, through a queryset update (no signals at all).
    Document.objects.filter(pk=field_notes.pk).update(collection=cast.private)
    assert collections_of_facts(field_notes) == {cast.private.pk}
    assert "Field Notes" not in graph_titles(cast.bob, "What did the Owl Survey find?")
    assert "Field Notes" in graph_titles(cast.alice, "What did the Owl Survey find?")


def test_a_fact_in_a_collection_it_no_longer_belongs_to_can_hide_a_passage_never_show_one(cast):
    """The collection only narrows what a hop reads; the join with the visible documents decides."""
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Owl Survey", text="The survey counts barn owls.")
    field_notes = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Field Notes", text="Field Notes of the Owl Survey in May."
    )
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    # Corrupt the copies on purpose: the private document's facts claim the team-readable collection...
    Mention.objects.filter(document_id=field_notes.pk).update(collection_id=cast.handbook.pk)
    Relation.objects.filter(document_id=field_notes.pk).update(collection_id=cast.handbook.pk)
    assert "Field Notes" not in graph_titles(cast.bob, "What did the Owl Survey find?")
    # ...and a collection no one reads: its reader no longer reaches it through the graph (so the hop does filter).
    assert "Field Notes" in graph_titles(cast.alice, "What did the Owl Survey find?")
    elsewhere = CollectionFactory(team=cast.alice.team, name="Elsewhere", default_access=Access.NONE)
    Mention.objects.filter(document_id=field_notes.pk).update(collection_id=elsewhere.pk)
    Relation.objects.filter(document_id=field_notes.pk).update(collection_id=elsewhere.pk)
    assert "Field Notes" not in graph_titles(cast.alice, "What did the Owl Survey find?")
