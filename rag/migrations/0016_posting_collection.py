"""Keyword postings carry their document's collection, so keyword search reads only the visible collections' postings.

Collections decide what a viewer sees; with the collection in the postings' index a search scans the
postings of the query's words in the collections it can read instead of those of every collection
(then joins them with the visible documents, as before: the collection only narrows the scan).
A trigger keeps the copy right when a document moves to another collection (the admin can move one).
"""

from django.db import migrations, models

BACKFILL = """
UPDATE keyword_postings k SET collection_id = d.collection_id
FROM documents_document d WHERE d.id = k.document_id
"""

# Any move, whoever makes it (the admin, a script, a queryset update): the document's postings follow.
# Through its chunks (the postings' primary key starts with the chunk), not a scan of the postings.
FOLLOW_MOVES = """
CREATE FUNCTION keyword_postings_follow_collection() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE keyword_postings SET collection_id = NEW.collection_id
  WHERE chunk_id IN (SELECT id FROM document_embeddings WHERE document_id = NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER keyword_postings_follow_collection
AFTER UPDATE OF collection_id ON documents_document
FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
EXECUTE FUNCTION keyword_postings_follow_collection();
"""
UNFOLLOW_MOVES = """
DROP TRIGGER IF EXISTS keyword_postings_follow_collection ON documents_document;
DROP FUNCTION IF EXISTS keyword_postings_follow_collection();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0006_document_tags"),
        ("rag", "0015_conversations"),
    ]

    operations = [
        migrations.AddField(model_name="keywordposting", name="collection_id", field=models.UUIDField(null=True)),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(model_name="keywordposting", name="collection_id", field=models.UUIDField()),
        migrations.RemoveIndex(model_name="keywordposting", name="posting_lexeme_covering"),
        migrations.AddIndex(
            model_name="keywordposting",
            index=models.Index(
                fields=["model_id", "lexeme", "collection_id"],
                include=("document_id", "document_version", "chunk", "tf", "length"),
                name="posting_lexeme_collection",
            ),
        ),
        migrations.RunSQL(FOLLOW_MOVES, UNFOLLOW_MOVES),
    ]
