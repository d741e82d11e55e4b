"""rag 0026: entity keys lose their Latin accents; two entities whose keys then agree become one."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from rag.indexing.pipeline import index_documents
from rag.models import Chunk, Entity, Mention, Relation
from tests.factories import DocumentFactory

pytestmark = [pytest.mark.upgrade, pytest.mark.django_db(transaction=True)]

BEFORE, AFTER = ("rag", "0025_index_status_queue"), ("rag", "0026_entity_keys_without_accents")


def migrate(target) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def test_accented_keys_are_keyed_again_and_an_entity_spelled_both_ways_becomes_one(cast):
    docs = [
        DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title=title, text=text)
        for title, text in [
            ("Films", "Amelie Poulain met Jean Dupont in Paris."),
            ("Notes", "Nothing here names anyone."),
        ]
    ]
    index_documents(document_ids=[d.pk for d in docs])
    films, notes = (Chunk.objects.get(document=d) for d in docs)
    plain = Entity.objects.get(key="amelie poulain")
    migrate(BEFORE)
    try:
        # What the code before 0026 wrote for the accented spelling: its own entity, named in both chunks.
        team = cast.alice.team
        accented = Entity.objects.create(team=team, key="amélie poulain", name="Amélie Poulain", kind="name")
        alone = Entity.objects.create(team=team, key="zoë", name="Zoë", kind="name")
        for chunk in (films, notes):
            Mention.objects.create(
                chunk=chunk,
                entity=accented,
                document_id=chunk.document_id,
                document_version=chunk.document_version,
                collection_id=cast.handbook.pk,
                model_id=chunk.model_id,
                name="Amélie Poulain",
                kind="name",
                count=3,
            )
        Relation.objects.create(
            chunk=notes,
            source=accented,
            target=alone,
            predicate="met",
            document_id=notes.document_id,
            document_version=notes.document_version,
            collection_id=cast.handbook.pk,
            model_id=notes.model_id,
        )
        migrate(AFTER)

        assert not Entity.objects.filter(pk=accented.pk).exists()
        assert Entity.objects.get(pk=alone.pk).key == "zoe", "a key alone of its spelling is keyed again"
        # In the chunk that named both, the kept entity's own mention stays; the other chunk's moves to it.
        assert Mention.objects.get(chunk=films, entity=plain).count == 1
        assert Mention.objects.get(chunk=notes, entity=plain).count == 3
        assert not Mention.objects.filter(entity_id=accented.pk).exists()
        assert Relation.objects.filter(source=plain, target=alone, predicate="met").count() == 1
    finally:
        call_command("migrate", verbosity=0)
