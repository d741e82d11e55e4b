"""The graph's mentions and relations carry their document's collection, so a hop reads only the facts of the
collections the viewer can read.

A name thousands of passages share (a hub) has as many relations and mentions in the team; a hop read every
one of them and checked each one's document against the viewer's visible set, so a viewer who reads one
collection of ten paid for all ten (at 1M chunks up to 180 ms for one question's spread; bench/latency.py). As keyword postings and sign bits do (migrations 0016, 0017), the collection
narrows the scan and the join with the visible documents still decides. A trigger keeps the copy right when
a document moves to another collection.
"""

from django.db import migrations, models

# The old indexes go first: the backfill then rewrites the rows without updating them.
BACKFILL = """
UPDATE graph_mentions m SET collection_id = d.collection_id FROM documents_document d WHERE d.id = m.document_id;
UPDATE graph_relations r SET collection_id = d.collection_id FROM documents_document d WHERE d.id = r.document_id;
-- Facts of a document that no longer exists reach no viewer (every query joins the visible documents).
DELETE FROM graph_mentions WHERE collection_id IS NULL;
DELETE FROM graph_relations WHERE collection_id IS NULL;
"""

# Any move, whoever makes it (the admin, a script, a queryset update): the document's facts follow, found
# through its chunks (the mentions' primary key and the relations' chunk index start with the chunk).
FOLLOW_MOVES = """
CREATE FUNCTION graph_facts_follow_collection() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE graph_mentions SET collection_id = NEW.collection_id
  WHERE chunk_id IN (SELECT id FROM document_embeddings WHERE document_id = NEW.id);
  UPDATE graph_relations SET collection_id = NEW.collection_id
  WHERE chunk_id IN (SELECT id FROM document_embeddings WHERE document_id = NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER graph_facts_follow_collection
AFTER UPDATE OF collection_id ON documents_document
FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
EXECUTE FUNCTION graph_facts_follow_collection();
"""
UNFOLLOW_MOVES = """
DROP TRIGGER IF EXISTS graph_facts_follow_collection ON documents_document;
DROP FUNCTION IF EXISTS graph_facts_follow_collection();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0006_document_tags"),
        ("rag", "0018_mention_entity_ranked"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="mention", name="mention_entity_ranked"),
        migrations.RemoveIndex(model_name="relation", name="relation_source_covering"),
        migrations.RemoveIndex(model_name="relation", name="relation_target_covering"),
        migrations.AddField(model_name="mention", name="collection_id", field=models.UUIDField(null=True)),
        migrations.AddField(model_name="relation", name="collection_id", field=models.UUIDField(null=True)),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(model_name="mention", name="collection_id", field=models.UUIDField()),
        migrations.AlterField(model_name="relation", name="collection_id", field=models.UUIDField()),
        migrations.AddIndex(
            model_name="mention",
            index=models.Index(
                fields=["entity", "model_id", "-subject", "-count", "chunk"],
                include=("document_id", "document_version", "collection_id", "title_only"),
                name="mention_entity_ranked",
            ),
        ),
        migrations.AddIndex(
            model_name="relation",
            index=models.Index(
                fields=["source", "model_id", "collection_id"],
                include=("target", "weight", "document_id", "document_version", "source_title_only", "target_title_only"),
                name="relation_source_collection",
            ),
        ),
        migrations.AddIndex(
            model_name="relation",
            index=models.Index(
                fields=["target", "model_id", "collection_id"],
                include=("source", "weight", "document_id", "document_version", "source_title_only", "target_title_only"),
                name="relation_target_collection",
            ),
        ),
        migrations.RunSQL(FOLLOW_MOVES, UNFOLLOW_MOVES),
    ]
