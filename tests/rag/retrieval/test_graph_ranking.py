"""Graph ranking: multi-hop through the facts, and never through a document the viewer cannot read."""

from __future__ import annotations

import random
import re

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from documents.models import Document
from rag.indexing.graph_extraction import rename_document_entity
from rag.indexing.pipeline import index_documents
from rag.models import Chunk, Entity, Mention
from rag.retrieval.explore import entity_get, entity_list
from rag.retrieval.graph_ranking import graph_ranking, question_keys
from rag.retrieval.search import search
from rag.retrieval.visibility import search_scope
from tests.access_matrix import build_random_matrix
from tests.factories import CollectionFactory, DocumentFactory, DocumentMembershipFactory

MODEL = "fake-embedding"


def titles(result) -> list[str]:
    return [result.documents[h.document_id].title for h in result.hits if h.document_id in result.documents]


def graph(user, query: str) -> tuple[list[tuple[int, float]], ...]:
    """The graph ranking as graph mode sees it, and as hybrid does (the graph's own evidence only)."""
    return tuple(
        [
            (h.chunk_id, round(h.score, 9))
            for h in graph_ranking(
                scope=search_scope(user=user), query=query, model_id=MODEL, limit=50, graph_evidence_only=only
            ).hits
        ]
        for only in (False, True)
    )


@pytest.fixture
def films(cast):
    """A film names its director; the director's page gives the death date (the answer is one hop away)."""
    docs = {
        "film": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="The Organization (Film)",
            text="The Organization is a 1971 thriller directed by Don Medford.",
        ),
        "director": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Don Medford",
            text="He was an American television and film director. He died on December 12, 2012.",
        ),
        "other": DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title="Another Film",
            text="A film about a date of death and a director, with no link to anything.",
        ),
    }
    index_documents(document_ids=[d.pk for d in docs.values()])
    return docs


def test_the_question_names_are_every_run_of_words_but_stopwords_alone():
    keys = question_keys("What is the date of death of the director of film The Organization (Film)?")
    assert "the organization film" in keys and "director" in keys
    assert "the" not in keys and "of the" not in keys


def test_graph_mode_reaches_the_document_one_hop_from_the_one_the_question_names(cast, api_for, films):
    response = api_for(cast.bob).post(
        "rag.search", {"query": "When did the director of film The Organization (Film) die?", "mode": "graph"}
    )
    assert response.status_code == 200, response.json()
    found = [hit["document"]["title"] for hit in response.json()["data"]]
    assert found[:2] == ["The Organization (Film)", "Don Medford"]
    assert "Another Film" not in found


def test_hybrid_search_puts_the_bridge_and_the_answer_on_top(cast, films):
    result = search(user=cast.bob, query="When did the director of film The Organization (Film) die?", limit=2, threshold=0.0)
    assert set(titles(result)) == {"The Organization (Film)", "Don Medford"}


def _hop_plans() -> tuple[int, int]:
    """This connection's generic and custom plans of the graph's hop statement, prepared by earlier searches."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            ["%hop AS (%"],
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def test_the_graph_plans_its_hops_once_and_runs_them_with_that_plan(cast, films):
    question = "When did the director of film The Organization (Film) die?"
    before = _hop_plans()
    first = titles(search(user=cast.bob, query=question, limit=5, threshold=0.0))
    again = titles(search(user=cast.bob, query=question, limit=5, threshold=0.0))
    generic, custom = _hop_plans()
    assert again == first and first[:2] in (
        ["The Organization (Film)", "Don Medford"],
        ["Don Medford", "The Organization (Film)"],
    )
    # Each search hops at least once (from the film the question names), every time with the prepared generic plan.
    assert generic - before[0] >= 2
    assert custom == before[1]


def test_without_prepared_statements_the_graph_ranks_the_same(cast, films):
    question = "When did the director of film The Organization (Film) die?"
    prepared = graph(cast.bob, question)
    before = _hop_plans()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = None  # what DATABASE_PREPARED_STATEMENTS=false gives a connection
    try:
        assert graph(cast.bob, question) == prepared
        assert _hop_plans() == before
    finally:
        connection.connection.prepare_threshold = threshold


def test_a_hop_never_passes_through_a_document_the_viewer_cannot_read(cast):
    # public film -> private "bridge" page that names the director -> public director page
    DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Night Train", text="Night Train was produced by Studio Vega."
    )
    DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Studio Vega", text="Studio Vega was founded by Irma Kovacs."
    )
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Irma Kovacs", text="Irma Kovacs died in 1990.")
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    question = "Who founded the studio that produced Night Train?"
    alice = titles(search(user=cast.alice, query=question, mode="graph", limit=10))
    bob = titles(search(user=cast.bob, query=question, mode="graph", limit=10))
    assert "Irma Kovacs" in alice, "two hops through the studio for a reader of the studio"
    assert "Studio Vega" not in bob and "Irma Kovacs" not in bob


def test_a_document_shared_with_the_viewer_counts_in_the_graph_outside_the_collections_they_read(cast):
    """Hops read the facts of the collections a viewer's documents can be in: those of shared documents too."""
    DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Night Train", text="Night Train was produced by Studio Vega."
    )
    studio = DocumentFactory(
        collection=cast.private, created_by=cast.alice, title="Studio Vega", text="Studio Vega was founded by Irma Kovacs."
    )
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Irma Kovacs", text="Irma Kovacs died in 1990.")
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    question = "Who founded the studio that produced Night Train?"
    assert "Irma Kovacs" not in titles(search(user=cast.bob, query=question, mode="graph", limit=10))
    DocumentMembershipFactory(document=studio, user=cast.bob)
    bob = titles(search(user=cast.bob, query=question, mode="graph", limit=10))
    assert "Studio Vega" in bob and "Irma Kovacs" in bob, "two hops through the page shared with bob"
    # Narrowed to the shared page, its facts are in scope.
    narrowed = search(user=cast.bob, query="Studio Vega founder", mode="graph", limit=10, document_id=studio.pk)
    assert titles(narrowed) == ["Studio Vega"]


def test_another_team_with_the_same_names_changes_nothing(cast, films):
    before = graph(cast.bob, "When did the director of film The Organization (Film) die?")
    theirs = CollectionFactory(team=cast.charlie.team)
    twins = [
        DocumentFactory(
            collection=theirs, created_by=cast.charlie, title="The Organization (Film)", text="Directed by Don Medford."
        ),
        DocumentFactory(collection=theirs, created_by=cast.charlie, title="Don Medford", text="A Don Medford died."),
    ]
    index_documents(document_ids=[d.pk for d in twins])
    assert graph(cast.bob, "When did the director of film The Organization (Film) die?") == before
    charlie = search(user=cast.charlie, query="The Organization (Film) director Don Medford", mode="graph", limit=10)
    assert {d.team_id for d in charlie.documents.values()} == {cast.charlie.team_id}


@pytest.mark.parametrize("seed", [3, 4])
def test_graph_rankings_equal_those_over_only_the_viewers_documents(db, seed):
    """The oracle: remove every document a user cannot read, rank again; nothing may change."""
    users, docs, *_ = build_random_matrix(seed, documents=120)
    rng = random.Random(seed)
    names = [f"Station {name}" for name in ("Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel")]
    for d in docs:
        d.title = rng.choice(names) + f" {rng.randint(1, 3)}"
        linked = rng.sample(names, 2)
        d.text = f"{d.title} connects to {linked[0]} {rng.randint(1, 3)} and {linked[1]} {rng.randint(1, 3)}."
    Document.objects.bulk_update(docs, ["title", "text"])
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    ranked = 0
    for user in users[:8]:
        query = f"Which line reaches {rng.choice(names)} 2 from {rng.choice(names)} 1?"
        expected = graph(user, query)
        ranked += bool(expected[0]) and bool(expected[1])
        with transaction.atomic():
            visible = Document.objects.visible_to(user).values_list("pk", flat=True)
            Document.objects.filter(team_id=user.team_id).exclude(pk__in=list(visible)).delete()
            Document.objects.exclude(team_id=user.team_id).delete()
            assert graph(user, query) == expected, f"{user.username}: invisible documents moved the graph ranking"
            transaction.set_rollback(True)
    assert ranked >= 4, "the oracle compared real rankings"


def graph_responses(user, query: str) -> tuple:
    """Everything the graph tells `user`: the ranking, graph.entities, and graph.entity of the listed entities."""
    found, total = entity_list(user=user, query="", limit=1000)
    details = [entity_get(user=user, entity_id=e.id, limit=1000) for e in found[:12]]
    return graph(user, query), found, total, details


@pytest.mark.parametrize("seed", [5, 6])
def test_graph_responses_equal_a_graph_read_from_only_the_viewers_documents(db, seed):
    """The stronger oracle: delete what a user cannot read and read every remaining document's facts again,
    so titles the user cannot read are never matched; no ranking, entity, kind, count, neighbour or passage
    may differ. Titles are written in lower case in other documents' text (the title automaton finds them,
    they are no proper names) and as wiki links (names), some of them titles of documents the user cannot read."""
    users, docs, *_ = build_random_matrix(seed, documents=120)
    rng = random.Random(seed)
    names = [f"Station {name}" for name in ("Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel")]
    for d in docs:
        d.title = f"{rng.choice(names)} {rng.randint(1, 3)}"
        a, b = rng.sample(names, 2)
        d.text = f"{d.title} connects to {a.lower()} {rng.randint(1, 3)} and [[{b} {rng.randint(1, 3)}]] at Grand Junction."
    Document.objects.bulk_update(docs, ["title", "text"])
    index_documents(document_ids=[d.pk for d in docs if d.deleted_at is None])
    assert Mention.objects.filter(title_only=True).exists(), "the oracle compares title-only facts"
    compared = 0
    for user in users[:8]:
        query = f"Which line reaches {rng.choice(names)} 2 from {rng.choice(names)} 1?"
        expected = graph_responses(user, query)
        compared += bool(expected[0][0]) and bool(expected[3])
        with transaction.atomic():
            visible = list(Document.objects.visible_to(user).values_list("pk", flat=True))
            Document.objects.filter(team_id=user.team_id).exclude(pk__in=visible).delete()
            Document.objects.exclude(team_id=user.team_id).delete()
            for document in Document.objects.filter(pk__in=visible):
                rename_document_entity(document=document, model_id=MODEL)  # reads its facts again
            assert graph_responses(user, query) == expected, f"{user.username}: invisible documents changed the graph"
            transaction.set_rollback(True)
    assert compared >= 4, "the oracle compared real rankings and entities"


def test_graph_entities_counts_only_what_the_caller_may_read(cast, api_for, films):
    DocumentFactory(collection=cast.private, created_by=cast.alice, title="Secret Memo", text="Don Medford was also in a memo.")
    index_documents(document_ids=list(Document.objects.filter(title="Secret Memo").values_list("pk", flat=True)))

    def medford(user):
        response = api_for(user).post("graph.entities", {"query": "medford"})
        assert response.status_code == 200, response.json()
        return {e["name"]: e for e in response.json()["data"]}

    assert medford(cast.alice)["Don Medford"]["documents"] == 3
    assert medford(cast.bob)["Don Medford"]["documents"] == 2, "the private memo's mention is not counted"
    assert medford(cast.charlie) == {}
    assert api_for(cast.bob).post("graph.entities", {"query": "secret memo"}).json()["data"] == []


def test_graph_entity_shows_visible_neighbours_and_passages_and_404s_otherwise(cast, api_for, films):
    film = api_for(cast.bob).post("graph.entities", {"query": "the organization film"}).json()["data"][0]
    response = api_for(cast.bob).post("graph.entity", {"id": film["id"]})
    assert response.status_code == 200, response.json()
    data = response.json()["data"]
    assert data["entity"]["name"] == "The Organization (Film)"
    assert any(n["entity"]["name"] == "Don Medford" and n["predicate"] == "MENTIONS" for n in data["neighbours"])
    assert data["passages"][0]["title"] == "The Organization (Film)"
    assert api_for(cast.charlie).post("graph.entity", {"id": film["id"]}).status_code == 404
    assert api_for(cast.bob).post("graph.entity", {"id": "not-a-uuid"}).json()["error"] == "invalid_query"


def test_a_hub_named_everywhere_and_cycles_keep_the_ranking_bounded_and_on_the_answer(cast):
    # Every page names the hub, the pages name each other in a ring (a cycle), and one chain leads
    # from the named film to its director.
    hub = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Acme Studios", text="Acme Studios made films.")
    pages = [
        DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title=f"Ring Film {i}",
            text=f"Ring Film {i} was made at Acme Studios. See Ring Film {(i + 1) % 40} and Ring Film {(i + 39) % 40}.",
        )
        for i in range(40)
    ]
    film = DocumentFactory(
        collection=cast.handbook,
        created_by=cast.alice,
        title="Night Train",
        text="Night Train was made at Acme Studios and directed by Vera Lind.",
    )
    director = DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Vera Lind", text="Vera Lind died in 1999.")
    index_documents(document_ids=[d.pk for d in [hub, *pages, film, director]])
    result = search(user=cast.bob, query="When did the director of Night Train die?", mode="graph", limit=10)
    found = titles(result)
    assert found[:2] == ["Night Train", "Vera Lind"], found
    assert len(result.hits) <= 10
    ring = search(user=cast.bob, query="What is next to Ring Film 7?", mode="graph", limit=50)
    assert titles(ring)[0] == "Ring Film 7" and len(ring.hits) <= 50, "a cycle ends: every chunk once, the named page first"
    assert len({h.chunk_id for h in ring.hits}) == len(ring.hits)


def test_a_question_naming_a_hub_and_a_specific_name_seeds_the_specific_one_more(cast):
    """A name every passage mentions is what keyword search already weighs: seeded by its specificity (an IDF
    of its visible mentions), it cannot outrank what a rare name in the same question leads to."""
    from rag.models import Entity
    from rag.retrieval.graph_ranking import _question_entities, specificity
    from rag.retrieval.stats import scope_index_stats
    from rag.retrieval.visibility import search_scope

    pages = [
        DocumentFactory(
            collection=cast.handbook,
            created_by=cast.alice,
            title=f"Report {i}",
            text=f"Report {i} was written at Acme Studios by the Night Crew."
            if i == 11
            else f"Report {i} was written at Acme Studios.",
        )
        for i in range(12)
    ]
    index_documents(document_ids=[d.pk for d in pages])
    query = "What did Acme Studios and the Night Crew write?"
    scope = search_scope(user=cast.bob)
    seeds, _ = _question_entities(scope, query, MODEL, scope_index_stats(scope, model_id=MODEL).chunks)
    by_name = dict(Entity.objects.filter(pk__in=seeds).values_list("key", "id"))
    assert seeds[by_name["night crew"]] == pytest.approx(1.0) and seeds[by_name["acme studios"]] < 0.6
    assert titles(search(user=cast.bob, query=query, mode="graph", limit=5))[0] == "Report 11"
    assert specificity(1, 100) == pytest.approx(1.0, abs=0.01) and specificity(100, 100) < 0.2


def test_beside_the_text_rankings_the_graph_ranks_a_passage_only_for_what_it_leads_to(cast, monkeypatch):
    """In hybrid, keyword and vector search read each passage's own text: the graph must not rank a passage
    again for naming what the question names, nor for an entity the spread reached through that passage (it
    names both ends of the relation). A passage one real hop away keeps its whole graph score, and a page still
    counts as the document an entity reached is the title of."""
    pages = {
        title: DocumentFactory(collection=cast.handbook, created_by=cast.alice, title=title, text=text)
        for title, text in {
            "Deploy tools": "Northwind Labs built the Harbor Deployer.",
            # Only the tool named: a name beside it, reached through this page, would be this page's own evidence.
            "History": "In 1999 a team of two designed the Harbor Deployer.",
            "Visitors": "Northwind Labs hosts visitors on Fridays.",
        }.items()
    }
    index_documents(document_ids=[d.pk for d in pages.values()])
    query = "Who designed the tool Northwind Labs built?"
    scope = search_scope(user=cast.bob)

    def scores(**kwargs) -> dict[str, float]:
        hits = graph_ranking(scope=scope, query=query, model_id=MODEL, limit=20, **kwargs).hits
        title_of = dict(Document.objects.values_list("pk", "title"))
        chunk_document = dict(Chunk.objects.filter(pk__in=[h.chunk_id for h in hits]).values_list("pk", "document_id"))
        return {title_of[chunk_document[h.chunk_id]]: h.score for h in hits}

    everything, graph_only = scores(), scores(graph_evidence_only=True)
    assert set(everything) == {"Deploy tools", "History", "Visitors"}
    assert graph_only["History"] == pytest.approx(everything["History"])
    for named_here in ("Deploy tools", "Visitors"):
        assert graph_only.get(named_here, 0.0) < everything[named_here], named_here
    # Hybrid asks the graph for its own evidence only.
    import rag.retrieval.search as search_module

    asked = []

    def recording(**kwargs):
        asked.append(kwargs.get("graph_evidence_only", False))
        return graph_ranking(**kwargs)

    monkeypatch.setattr(search_module, "graph_ranking", recording)
    search(user=cast.bob, query=query, mode="hybrid", limit=3, threshold=0)
    search(user=cast.bob, query=query, mode="graph", limit=3, threshold=0)
    assert asked == [True, False]


def test_a_named_entity_a_seed_chunk_is_about_spreads_with_the_stronger_seed_though_read_before(cast):
    """Hybrid search reads the question's part of the graph while the keyword ranking runs (question_graph).
    When one of the best chunks is about an entity the question names, that entity spreads with the stronger
    of its two seeds, as if read after: the spread read before, with the weaker, is not reused."""
    from rag.models import Entity
    from rag.retrieval.graph_ranking import SEED_FROM_RANKINGS, question_graph
    from rag.retrieval.stats import scope_index_stats

    studio = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Acme Studios", text="Acme Studios employs the Night Crew."
    )
    crew = DocumentFactory(
        collection=cast.handbook, created_by=cast.alice, title="Night Crew", text="The Night Crew works nights."
    )
    reports = [
        DocumentFactory(
            collection=cast.handbook, created_by=cast.alice, title=f"Report {i}", text=f"Report {i} was written at Acme Studios."
        )
        for i in range(12)
    ]
    index_documents(document_ids=[studio.pk, crew.pk, *(r.pk for r in reports)])
    query = "Who works for Acme Studios?"
    scope = search_scope(user=cast.bob)
    chunks = scope_index_stats(scope, model_id=MODEL).chunks
    acme = Entity.objects.get(key="acme studios").pk
    question = question_graph(scope=scope, query=query, model_id=MODEL, scope_chunks=chunks)
    assert list(question.named) == [acme] and question.named[acme] < SEED_FROM_RANKINGS  # a hub: weaker than a first seed
    studio_chunk = Chunk.objects.get(document=studio).pk
    crew_chunk = Chunk.objects.get(document=crew).pk

    def crew_score(**kwargs) -> float:
        hits = graph_ranking(scope=scope, query=query, model_id=MODEL, limit=20, scope_chunks=chunks, **kwargs).hits
        return next(h.score for h in hits if h.chunk_id == crew_chunk)

    alone = crew_score()
    read_before = crew_score(seed_chunk_ids=[studio_chunk], question=question)
    assert read_before == pytest.approx(crew_score(seed_chunk_ids=[studio_chunk]), rel=1e-9)
    # The Night Crew is one hop from Acme Studios: its score scales with Acme Studios' seed.
    assert read_before == pytest.approx(alone * SEED_FROM_RANKINGS / question.named[acme], rel=1e-6)


def _statements(user, query: str, mode: str) -> list[tuple[str, tuple]]:
    """The statements a search runs, as sent before their values are bound, each with its values' types and lengths."""

    def shape(value) -> object:
        if isinstance(value, dict):
            return tuple(sorted((name, shape(v)) for name, v in value.items()))
        if isinstance(value, list | tuple):
            return (type(value).__name__, len(value))
        return type(value).__name__

    sent: list[tuple[str, tuple]] = []

    def record(execute, sql, params, many, context):
        sent.append((re.sub(r'SAVEPOINT "s[0-9]+_x[0-9]+"', "SAVEPOINT s", sql), shape(params)))
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(record):
        search(user=user, query=query, mode=mode, limit=5, threshold=0.0)
    assert len(sent) == len(captured.captured_queries)
    return sent


@pytest.mark.parametrize("mode", ["graph", "hybrid"])
def test_a_search_runs_the_same_statements_whether_or_not_a_document_it_cannot_read_names_the_question(cast, mode):
    """Whether the team holds an entity only in documents the viewer cannot read must not change what runs: neither
    how many statements nor which (their time would tell)."""
    DocumentFactory(collection=cast.private, created_by=cast.alice, title="Plans", text="Falcon Works builds the new depot.")
    DocumentFactory(collection=cast.handbook, created_by=cast.alice, title="Depot", text="Heron Yards built the old depot.")
    index_documents(document_ids=list(Document.objects.values_list("pk", flat=True)))
    assert Entity.objects.filter(key="falcon works").exists() and not Entity.objects.filter(key="osprey works").exists()
    search(user=cast.bob, query="Who built the depot?", mode=mode, limit=5, threshold=0.0)  # warm what is cached per viewer
    invisible = _statements(cast.bob, "Who leads Falcon Works today?", mode)
    missing = _statements(cast.bob, "Who leads Osprey Works today?", mode)
    assert invisible == missing
