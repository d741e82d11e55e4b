"""Upgrading a database that holds chunks, from every earlier rag migration to the latest migrations.

Rows go in through the models of the starting state; the upgraded database is read with SQL
against table names, because models get renamed over time and their tables do not. Each starting
state has a team of its own, whose rows every query below is limited to (`%(team)s`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from rag.indexing.keyword_postings import refresh_search_vectors

pytestmark = [pytest.mark.upgrade, pytest.mark.django_db(transaction=True)]

# The migration that recomputed the keyword columns with the headings above each chunk. The app
# of every state from it on writes them that way; the app of every earlier state wrote title and
# text only.
HEADINGS_MIGRATION = ("rag", "0005_search_vectors_with_headings")

# The migration that recorded each team's serving model from the chunks it had.
SERVING_MIGRATION = ("rag", "0013_serving_model")
# The migration that flagged graph facts that exist only because some document's title names them.
TITLE_FLAGS_MIGRATION = ("rag", "0014_graph_title_only")
# The migration that gave each mention its chunk's own spelling and kind of the entity.
TEXT_HASH_MIGRATION = ("rag", "0020_index_status_text_hash")
MENTION_NAMES_MIGRATION = ("rag", "0021_mention_name_and_kind")

MODEL, DIMENSION = "fake-embedding", 384
OTHER_MODEL, OTHER_DIMENSION = "upgrade-test-model", 8

# How the app wrote a chunk's keyword text (e: the chunk, d: its document) before headings...
TITLE_AND_TEXT = "setweight(to_tsvector('english', d.title), 'A') || to_tsvector('english', e.chunk_text)"
# ...and from the headings migration on: headings the chunk does not contain come between them.
TITLE_HEADINGS_AND_TEXT = """setweight(to_tsvector('english', d.title), 'A')
    || setweight(to_tsvector('english', coalesce(
         (SELECT string_agg(h, ' ') FROM jsonb_array_elements_text(e.metadata -> 'heading_path') h
          WHERE strpos(e.chunk_text, h) = 0), '')), 'B')
    || to_tsvector('english', e.chunk_text)"""

# The team's chunks (e), with their documents (d).
TEAM_CHUNKS = "document_embeddings e JOIN documents_document d ON d.id = e.document_id AND d.team_id = %(team)s"
CHUNKS = f"""SELECT e.id, e.document_id, e.chunk_index, e.document_version, e.model_id, e.chunk_text, e.embedding::text, e.metadata
             FROM {TEAM_CHUNKS} ORDER BY e.id"""
DOCUMENTS_AND_STATUSES = """SELECT d.id, d.team_id, d.collection_id, d.title, d.version, s.model_id, s.state, s.indexed_version, s.chunk_count
                            FROM documents_document d JOIN document_index_status s ON s.document_id = d.id
                            WHERE d.team_id = %(team)s ORDER BY d.id, s.model_id"""
# Every posting a chunk's keyword columns call for, as the app wrote them before postings carried the collection...
EARLIER_POSTINGS = f"""SELECT e.id, u.lexeme, e.document_id, e.document_version, e.model_id,
                              least(cardinality(u.positions), 32767), e.doc_length
                       FROM {TEAM_CHUNKS}, unnest(e.search_vector) u"""
# ...and with their document's collection, as the latest state holds them.
EXPECTED_POSTINGS = f"""SELECT e.id, u.lexeme, e.document_id, e.document_version, d.collection_id, e.model_id,
                               least(cardinality(u.positions), 32767), e.doc_length
                        FROM {TEAM_CHUNKS}, unnest(e.search_vector) u"""
POSTINGS = """SELECT k.chunk_id, k.lexeme, k.document_id, k.document_version, k.collection_id, k.model_id, k.tf, k.length
              FROM keyword_postings k JOIN documents_document d ON d.id = k.document_id AND d.team_id = %(team)s"""
KEYWORD_LENGTHS = """SELECT s.document_id, s.model_id, s.keyword_length,
                            (SELECT coalesce(sum(e.doc_length), 0) FROM document_embeddings e
                             WHERE e.document_id = s.document_id AND e.model_id = s.model_id)
                     FROM document_index_status s JOIN documents_document d ON d.id = s.document_id AND d.team_id = %(team)s
                     ORDER BY s.document_id, s.model_id"""


def earlier_rag_migrations() -> list[str]:
    """Every rag migration before the latest: each is a state a database with chunks may be in."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    (latest,) = graph.leaf_nodes("rag")
    return [name for app, name in graph.forwards_plan(latest) if app == "rag" and (app, name) != latest]


def fetch(sql: str, team: UUID | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, None if team is None else {"team": team})
        return cursor.fetchall()


def execute(sql: str, team: UUID | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, None if team is None else {"team": team})


def model_of_table(apps: Apps, table: str) -> type[Any]:
    """The state's model for a table, whatever the model is called in that state.

    type[Any], as Apps.get_model: a state's model is built at run time, so nothing static describes it.
    """
    (model,) = [m for m in apps.get_models() if m._meta.db_table == table]
    return model


def vector(seed: int, dimension: int) -> list[float]:
    return [((seed * 31 + i * 7) % 97) / 97 for i in range(dimension)]


@dataclass
class Upgrade:
    """A team seeded at `start`, and its rows as the app of that state wrote them."""

    start: str
    team: UUID
    chunks_before: list[tuple]
    documents_and_statuses_before: list[tuple]


def seed(apps: Apps, *, start: str, headings: bool) -> Upgrade:
    """A team of the starting state's own: its handbook, with chunks, vectors and index statuses as the app
    of that state wrote them."""
    Team = apps.get_model("permissions", "Team")
    User = apps.get_model("permissions", "User")
    Collection = apps.get_model("documents", "Collection")
    Document = apps.get_model("documents", "Document")
    Chunk = model_of_table(apps, "document_embeddings")
    Status = model_of_table(apps, "document_index_status")

    team = Team.objects.create(name=f"Acme from {start}")
    alice = User.objects.create(username=f"alice-{start}", password="!", team=team, role="admin")
    User.objects.create(username=f"bob-{start}", password="!", team=team)
    handbook = Collection.objects.create(team=team, name="Handbook", default_access="read", created_by=alice)

    def document(title: str, text: str, version: int = 1):
        return Document.objects.create(team=team, collection=handbook, created_by=alice, title=title, text=text, version=version)

    def chunk(
        doc,
        index: int,
        text: str,
        headings: list[str],
        *,
        model: str = MODEL,
        dimension: int = DIMENSION,
        version: int | None = None,
    ) -> None:
        start = doc.text.find(text)
        Chunk.objects.create(
            document=doc,
            team=team,
            chunk_index=index,
            chunk_text=text,
            document_version=version or doc.version,
            content_hash=hashlib.sha256(text.encode()).hexdigest(),
            model_id=model,
            embedding=vector(len(doc.title) + index, dimension),
            start_offset=start,
            end_offset=start + len(text),
            metadata={"heading_path": headings, "has_code": False, "has_table": False, "token_count": len(text.split())},
        )

    deploy = document(
        "Deployment guide",
        "# Deploying\n\nShip it with the release script.\n\n## Rollbacks\n\nRedeploy the previous tag when a release misbehaves.",
    )
    chunk(deploy, 0, "# Deploying\n\nShip it with the release script.", ["Deploying"])
    chunk(deploy, 1, "Redeploy the previous tag when a release misbehaves.", ["Deploying", "Rollbacks"])
    chunk(
        deploy, 0, "# Deploying\n\nShip it with the release script.", ["Deploying"], model=OTHER_MODEL, dimension=OTHER_DIMENSION
    )
    # Edited since it was indexed: its chunks still carry version 1 until the worker catches up.
    onboarding = document("Onboarding", "# First week\n\nMeet your buddy and read the handbook twice.", version=2)
    chunk(onboarding, 0, "Meet your buddy and read the handbook twice.", ["First week"], version=1)
    empty = document("Glossary", "")
    # Edited without a new version after they were indexed (as the admin once saved them): inside a chunk...
    runbook = document("Runbook", "# Runbook\n\nPage the on-call engineer.")
    chunk(runbook, 0, "# Runbook\n\nPage the on-call engineer.", ["Runbook"])
    Document.objects.filter(pk=runbook.pk).update(text="# Runbook\n\nPage the incident lead.")
    # ...and after the last one.
    faq = document("FAQ", "# FAQ\n\nAsk in the channel.")
    chunk(faq, 0, "# FAQ\n\nAsk in the channel.", ["FAQ"])
    Document.objects.filter(pk=faq.pk).update(text="# FAQ\n\nAsk in the channel.\n\nThe door code is 4711.")

    Status.objects.create(document=deploy, model_id=MODEL, state="indexed", indexed_version=1, chunk_count=2)
    Status.objects.create(document=deploy, model_id=OTHER_MODEL, state="indexed", indexed_version=1, chunk_count=1)
    Status.objects.create(document=onboarding, model_id=MODEL, state="pending", indexed_version=1, chunk_count=1)
    Status.objects.create(document=empty, model_id=MODEL, state="indexed", indexed_version=1, chunk_count=0)
    Status.objects.create(document=runbook, model_id=MODEL, state="indexed", indexed_version=1, chunk_count=1)
    Status.objects.create(document=faq, model_id=MODEL, state="indexed", indexed_version=1, chunk_count=1)

    execute(
        f"""UPDATE document_embeddings e SET search_vector = {TITLE_HEADINGS_AND_TEXT if headings else TITLE_AND_TEXT}
            FROM documents_document d WHERE d.id = e.document_id AND d.team_id = %(team)s""",
        team.pk,
    )
    execute(
        """UPDATE document_embeddings e SET doc_length = coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(search_vector) u), 0)
           FROM documents_document d WHERE d.id = e.document_id AND d.team_id = %(team)s""",
        team.pk,
    )
    if headings:
        execute(
            """UPDATE document_index_status s SET keyword_length = coalesce(
                   (SELECT sum(e.doc_length) FROM document_embeddings e
                    WHERE e.document_id = s.document_id AND e.model_id = s.model_id), 0)
               FROM documents_document d WHERE d.id = s.document_id AND d.team_id = %(team)s""",
            team.pk,
        )
    if "keyword_postings" in connection.introspection.table_names():
        with connection.cursor() as cursor:
            columns = {c.name for c in connection.introspection.get_table_description(cursor, "keyword_postings")}
        if "collection_id" in columns:  # from the migration that gave postings their document's collection
            execute(
                "INSERT INTO keyword_postings (chunk_id, lexeme, document_id, document_version, collection_id, model_id, tf, length) "
                f"{EXPECTED_POSTINGS}",
                team.pk,
            )
        else:
            execute(
                f"INSERT INTO keyword_postings (chunk_id, lexeme, document_id, document_version, model_id, tf, length) "
                f"{EARLIER_POSTINGS}",
                team.pk,
            )
    return Upgrade(
        start=start,
        team=team.pk,
        chunks_before=fetch(CHUNKS, team.pk),
        documents_and_statuses_before=fetch(DOCUMENTS_AND_STATUSES, team.pk),
    )


@pytest.fixture
def executor() -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    yield executor
    # The tests that follow need the latest schema, however this one ended. A failed upgrade
    # leaves its rows behind, and they would fail it again: they go first (all hang off the team).
    execute("TRUNCATE permissions_team CASCADE")
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


# What an upgrade from an earlier state keeps: each a check of one team's rows in the upgraded database,
# with the migration before which a start must be for the check to apply (None: every start).
FACTS: list[tuple[Callable[[Upgrade], None], str | None]] = []


def fact(check: Callable[[Upgrade], None]) -> Callable[[Upgrade], None]:
    FACTS.append((check, None))
    return check


def fact_of_starts_before(migration: str) -> Callable[[Callable[[Upgrade], None]], Callable[[Upgrade], None]]:
    """A fact of the upgrades that run `migration` (from a start before it); later starts never need it."""

    def register(check: Callable[[Upgrade], None]) -> Callable[[Upgrade], None]:
        FACTS.append((check, migration))
        return check

    return register


def test_an_upgrade_from_every_earlier_migration_keeps_every_fact(executor: MigrationExecutor, subtests: pytest.Subtests) -> None:
    """One pass from the first rag migration to the latest, stopping at each earlier one to seed a team
    of its own: each team's rows go through every migration after their start, as an upgrade from that
    state would take them. Every fact is then checked for every team and reported by start and name."""
    upgrades = []
    for start in earlier_rag_migrations():
        migrated = executor.migrate([("rag", start)])
        # Rendered anew: the models of a state that migrations ran through may point at earlier renders.
        state = ProjectState(migrated.models, migrated.real_apps)
        upgrades.append(
            seed(state.apps, start=start, headings=HEADINGS_MIGRATION in executor.loader.graph.forwards_plan(("rag", start)))
        )
        executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    for upgrade in upgrades:
        for check, before in FACTS:
            if before is not None and upgrade.start >= before:
                continue
            with subtests.test(f"from rag {upgrade.start}: {check.__name__}"):
                check(upgrade)


@fact
def the_chunks_their_text_and_vectors_come_through_unchanged(upgrade: Upgrade) -> None:
    assert fetch(CHUNKS, upgrade.team) == upgrade.chunks_before


@fact
def the_documents_and_their_index_statuses_come_through_unchanged(upgrade: Upgrade) -> None:
    assert fetch(DOCUMENTS_AND_STATUSES, upgrade.team) == upgrade.documents_and_statuses_before


@fact
def every_chunk_has_a_keyword_vector_and_its_length(upgrade: Upgrade) -> None:
    missing = fetch(
        f"""SELECT e.id FROM {TEAM_CHUNKS} WHERE e.search_vector IS NULL
            OR e.doc_length <> (SELECT sum(cardinality(u.positions)) FROM unnest(e.search_vector) u)""",
        upgrade.team,
    )
    assert missing == []


@fact
def headings_a_chunk_does_not_contain_are_among_its_keywords(upgrade: Upgrade) -> None:
    (heading_keywords,) = fetch(
        f"SELECT array_agg(u.lexeme ORDER BY u.lexeme) FROM {TEAM_CHUNKS}, "
        "unnest(ts_filter(e.search_vector, '{b}')) u WHERE e.chunk_text LIKE 'Redeploy%%'",
        upgrade.team,
    )[0]
    assert heading_keywords == ["deploy", "rollback"]


@fact
def every_lexeme_of_every_chunk_has_its_posting_with_tf_length_and_version(upgrade: Upgrade) -> None:
    assert sorted(fetch(POSTINGS, upgrade.team)) == sorted(fetch(EXPECTED_POSTINGS, upgrade.team))


@fact
def no_chunk_is_left_without_postings(upgrade: Upgrade) -> None:
    without = f"SELECT e.id FROM {TEAM_CHUNKS} WHERE NOT EXISTS (SELECT FROM keyword_postings k WHERE k.chunk_id = e.id)"
    assert fetch(without, upgrade.team) == []


@fact
def every_chunk_has_the_signs_of_its_vector_with_its_document_s_collection(upgrade: Upgrade) -> None:
    sign_bits = """SELECT b.chunk_id, b.model_id, b.collection_id, b.document_id, b.document_version, b.bits::text
                   FROM chunk_sign_bits b JOIN documents_document d ON d.id = b.document_id AND d.team_id = %(team)s"""
    expected = f"""SELECT e.id, e.model_id, d.collection_id, e.document_id, e.document_version,
                          (SELECT string_agg(CASE WHEN x > 0 THEN '1' ELSE '0' END, '' ORDER BY i)
                           FROM unnest(e.embedding::real[]) WITH ORDINALITY AS u(x, i))
                   FROM {TEAM_CHUNKS}"""
    rows = fetch(sign_bits, upgrade.team)
    assert len(rows) == len(fetch(CHUNKS, upgrade.team)) and {len(row[5]) for row in rows} == {DIMENSION, OTHER_DIMENSION}
    assert sorted(rows) == sorted(fetch(expected, upgrade.team))


@fact
def each_index_status_keyword_length_is_the_sum_of_its_chunks_lengths(upgrade: Upgrade) -> None:
    mismatched = [row for row in fetch(KEYWORD_LENGTHS, upgrade.team) if row[2] != row[3]]
    assert mismatched == []


# From the serving-model migration on, the app records the serving model when it indexes; the seed writes chunks only.
@fact_of_starts_before(SERVING_MIGRATION[1])
def each_team_with_chunks_keeps_being_searched_with_the_model_most_of_them_have(upgrade: Upgrade) -> None:
    # The handbook has three chunks of MODEL and one of OTHER_MODEL; the configured provider embedded MODEL's.
    assert fetch("SELECT model_id, provider, dimension FROM rag_serving_model WHERE team_id = %(team)s", upgrade.team) == [
        (MODEL, "fake", DIMENSION)
    ]


# From the text-hash migration on, the app records the hash as it indexes; the seed writes none.
@fact_of_starts_before(TEXT_HASH_MIGRATION[1])
def a_status_has_its_document_s_text_hash_only_where_its_chunks_are_of_that_text(upgrade: Upgrade) -> None:
    matches = """SELECT d.title, s.model_id, s.indexed_text_hash = encode(sha256(convert_to(d.text, 'UTF8')), 'hex')
                 FROM documents_document d JOIN document_index_status s ON s.document_id = d.id
                 WHERE d.team_id = %(team)s ORDER BY d.title, s.model_id"""
    assert fetch(matches, upgrade.team) == [
        ("Deployment guide", MODEL, True),
        # Its one chunk leaves the rollback section out: not provably of this text, so reindexed.
        ("Deployment guide", OTHER_MODEL, False),
        ("FAQ", MODEL, False),
        ("Glossary", MODEL, True),
        ("Onboarding", MODEL, False),
        ("Runbook", MODEL, False),
    ]


@fact
def the_keyword_index_is_what_the_app_writes_today(upgrade: Upgrade) -> None:
    """Last: it rewrites the team's keyword index (to the same rows, when it holds)."""

    def index() -> tuple[list, list, list]:
        return (
            fetch(f"SELECT e.id, e.search_vector::text, e.doc_length FROM {TEAM_CHUNKS} ORDER BY e.id", upgrade.team),
            sorted(fetch(POSTINGS, upgrade.team)),
            fetch(KEYWORD_LENGTHS, upgrade.team),
        )

    upgraded = index()
    documents = fetch("SELECT id FROM documents_document WHERE team_id = %(team)s", upgrade.team)
    refresh_search_vectors(document_ids=[document_id for (document_id,) in documents])
    assert index() == upgraded


def test_graph_facts_from_before_the_title_flags_count_only_where_a_title_may_be_read(executor: MigrationExecutor) -> None:
    """Facts written before 0014 do not say whether only a title made them: every non-subject mention of a
    title entity, and every relation end that is a title not the subject of the relation's own chunk, is
    flagged (the safe reading); names, subjects and a chunk's own title stay unflagged."""
    (before,) = executor.loader.graph.node_map[TITLE_FLAGS_MIGRATION].parents
    state = executor.migrate([before.key])
    seed(state.apps, start=before.key[1], headings=True)
    execute("""INSERT INTO graph_entities (id, team_id, key, name, kind, created_at)
               SELECT gen_random_uuid(), t.id, k.key, k.name, k.kind, now() FROM permissions_team t,
               (VALUES ('deployment guide', 'Deployment guide', 'document'), ('release script', 'Release script', 'name')) k(key, name, kind)""")
    facts = """FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id
               JOIN graph_entities title ON title.key = 'deployment guide' JOIN graph_entities name ON name.key = 'release script'
               WHERE e.model_id = '{model}' AND e.chunk_index = 0 AND d.title = '{document}'"""
    deploy, onboarding = facts.format(model=MODEL, document="Deployment guide"), facts.format(model=MODEL, document="Onboarding")
    execute(f"""INSERT INTO graph_mentions (chunk_id, entity_id, document_id, document_version, model_id, count, subject)
                SELECT e.id, title.id, e.document_id, e.document_version, e.model_id, 1, TRUE {deploy}
                UNION ALL SELECT e.id, name.id, e.document_id, e.document_version, e.model_id, 1, FALSE {deploy}
                UNION ALL SELECT e.id, title.id, e.document_id, e.document_version, e.model_id, 1, FALSE {onboarding}
                UNION ALL SELECT e.id, name.id, e.document_id, e.document_version, e.model_id, 1, FALSE {onboarding}""")
    execute(f"""INSERT INTO graph_relations (chunk_id, source_id, target_id, predicate, confidence, weight,
                                             document_id, document_version, model_id)
                SELECT e.id, title.id, name.id, 'MENTIONS', 1, 1, e.document_id, e.document_version, e.model_id {deploy}
                UNION ALL SELECT e.id, name.id, title.id, 'CO_OCCURS', 0.5, 0.5, e.document_id, e.document_version, e.model_id
                {onboarding}""")
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert sorted(
        fetch("""SELECT d.title, g.key, m.subject, m.title_only FROM graph_mentions m
                 JOIN graph_entities g ON g.id = m.entity_id JOIN documents_document d ON d.id = m.document_id""")
    ) == [
        ("Deployment guide", "deployment guide", True, False),
        ("Deployment guide", "release script", False, False),
        ("Onboarding", "deployment guide", False, True),
        ("Onboarding", "release script", False, False),
    ]
    assert sorted(
        fetch("""SELECT d.title, r.predicate, r.source_title_only, r.target_title_only FROM graph_relations r
                 JOIN documents_document d ON d.id = r.document_id""")
    ) == [("Deployment guide", "MENTIONS", False, False), ("Onboarding", "CO_OCCURS", False, True)]
    # And from 0019 on, every fact carries its document's collection (hops read the readable collections' only).
    for table in ("graph_mentions", "graph_relations"):
        assert fetch(f"""SELECT d.title, f.collection_id = d.collection_id FROM {table} f
                         JOIN documents_document d ON d.id = f.document_id GROUP BY 1, 2 ORDER BY 1""") == [
            ("Deployment guide", True),
            ("Onboarding", True),
        ]


def test_mentions_from_before_their_own_spellings_take_their_chunks_spelling_never_another_chunks(
    executor: MigrationExecutor,
) -> None:
    """Facts written before 0021 kept one spelling per entity, the first chunk's. A subject mention takes its
    document's title; a named one the spelling its chunk (or a heading above it) holds, else the entity's key;
    a title-only one keeps the entity's (never shown). A title entity named in a chunk is a name there."""
    (before,) = executor.loader.graph.node_map[MENTION_NAMES_MIGRATION].parents
    state = executor.migrate([before.key])
    seed(state.apps, start=before.key[1], headings=True)
    execute("""INSERT INTO graph_entities (id, team_id, key, name, kind, created_at)
               SELECT gen_random_uuid(), t.id, k.key, k.name, k.kind, now() FROM permissions_team t,
               (VALUES ('deployment guide', 'DEPLOYMENT-GUIDE', 'document'), ('release script', 'Release-Script', 'name'),
                       ('first week', 'First week', 'topic'), ('buddy system', 'Buddy System', 'name'),
                       ('rollbacks', 'ROLLBACKS', 'document')) k(key, name, kind)""")
    execute(f"""INSERT INTO graph_mentions (chunk_id, entity_id, document_id, document_version, collection_id, model_id,
                                            count, subject, title_only)
                SELECT e.id, g.id, e.document_id, e.document_version, d.collection_id, e.model_id, 1, f.subject, f.title_only
                FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id,
                (VALUES ('Deployment guide', 0, 'deployment guide', TRUE, FALSE),
                        ('Deployment guide', 0, 'release script', FALSE, FALSE),
                        ('Deployment guide', 1, 'rollbacks', FALSE, FALSE),
                        ('Onboarding', 0, 'deployment guide', FALSE, TRUE),
                        ('Onboarding', 0, 'first week', FALSE, FALSE),
                        ('Onboarding', 0, 'buddy system', FALSE, FALSE)) f(title, chunk_index, key, subject, title_only)
                JOIN graph_entities g ON g.key = f.key
                WHERE d.title = f.title AND e.chunk_index = f.chunk_index AND e.model_id = '{MODEL}'""")
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert sorted(
        fetch("""SELECT d.title, g.key, m.name, m.kind FROM graph_mentions m
                 JOIN graph_entities g ON g.id = m.entity_id JOIN documents_document d ON d.id = m.document_id""")
    ) == [
        ("Deployment guide", "deployment guide", "Deployment guide", "document"),
        ("Deployment guide", "release script", "release script", "name"),
        ("Deployment guide", "rollbacks", "Rollbacks", "name"),
        ("Onboarding", "buddy system", "buddy system", "name"),
        ("Onboarding", "deployment guide", "DEPLOYMENT-GUIDE", "document"),
        ("Onboarding", "first week", "First week", "topic"),
    ]
