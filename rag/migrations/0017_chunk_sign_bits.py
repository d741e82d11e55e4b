"""The signs of every chunk's embedding, one bit per dimension, for vector search in scopes too narrow to walk.

A filtered HNSW walk through a narrow share of the index misses whole groups of the scope's nearest chunks
(recall@10 0.80 for a viewer seeing 10% of 1M chunks; bench/latency.py). Scanning the scope's
sign bits (48 bytes for 384 dimensions, read from one covering index) and reranking the nearest few hundred by
their full vectors finds them at a fraction of an exact scan's cost.

The database writes the bits as chunks are inserted (a trigger over each statement's new rows), so every way
of writing a chunk keeps them, and follows an embedding rewritten in place and a document moved to another
collection (the admin can move one).
"""

import django.db.models.deletion
from django.db import migrations, models

import rag.models

BACKFILL = """
INSERT INTO chunk_sign_bits (chunk_id, model_id, collection_id, document_id, document_version, bits)
SELECT e.id, e.model_id, d.collection_id, e.document_id, e.document_version, binary_quantize(e.embedding)
FROM document_embeddings e JOIN documents_document d ON d.id = e.document_id
"""

KEEP_BITS = """
CREATE FUNCTION chunk_sign_bits_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chunk_sign_bits (chunk_id, model_id, collection_id, document_id, document_version, bits)
  SELECT e.id, e.model_id, d.collection_id, e.document_id, e.document_version, binary_quantize(e.embedding)
  FROM inserted e JOIN documents_document d ON d.id = e.document_id;
  RETURN NULL;
END $$;
CREATE TRIGGER chunk_sign_bits_insert
AFTER INSERT ON document_embeddings REFERENCING NEW TABLE AS inserted
FOR EACH STATEMENT EXECUTE FUNCTION chunk_sign_bits_insert();

CREATE FUNCTION chunk_sign_bits_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE chunk_sign_bits SET model_id = NEW.model_id, document_id = NEW.document_id,
         document_version = NEW.document_version, bits = binary_quantize(NEW.embedding),
         collection_id = (SELECT collection_id FROM documents_document WHERE id = NEW.document_id)
  WHERE chunk_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER chunk_sign_bits_update
AFTER UPDATE OF embedding, model_id, document_id, document_version ON document_embeddings
FOR EACH ROW EXECUTE FUNCTION chunk_sign_bits_update();

CREATE FUNCTION chunk_sign_bits_follow_collection() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE chunk_sign_bits SET collection_id = NEW.collection_id
  WHERE chunk_id IN (SELECT id FROM document_embeddings WHERE document_id = NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER chunk_sign_bits_follow_collection
AFTER UPDATE OF collection_id ON documents_document
FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
EXECUTE FUNCTION chunk_sign_bits_follow_collection();
"""
DROP_KEEP_BITS = """
DROP TRIGGER IF EXISTS chunk_sign_bits_follow_collection ON documents_document;
DROP FUNCTION IF EXISTS chunk_sign_bits_follow_collection();
DROP TRIGGER IF EXISTS chunk_sign_bits_update ON document_embeddings;
DROP FUNCTION IF EXISTS chunk_sign_bits_update();
DROP TRIGGER IF EXISTS chunk_sign_bits_insert ON document_embeddings;
DROP FUNCTION IF EXISTS chunk_sign_bits_insert();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0006_document_tags"),
        ("rag", "0016_posting_collection"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChunkSignBits",
            fields=[
                (
                    "chunk",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="rag.chunk",
                    ),
                ),
                ("model_id", models.CharField(max_length=200)),
                ("collection_id", models.UUIDField()),
                ("document_id", models.UUIDField()),
                ("document_version", models.PositiveIntegerField()),
                ("bits", rag.models.SignBitsField()),
            ],
            options={"db_table": "chunk_sign_bits"},
        ),
        # The triggers first: creating them locks the chunks against writes until this migration commits, so
        # no chunk written meanwhile can miss its bits. Then the chunks already there, then the index (one
        # sorted build of it, not a million insertions).
        migrations.RunSQL(KEEP_BITS, DROP_KEEP_BITS),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="chunksignbits",
            index=models.Index(
                fields=["model_id", "collection_id"],
                include=("document_id", "document_version", "chunk", "bits"),
                name="sign_bits_collection",
            ),
        ),
    ]
