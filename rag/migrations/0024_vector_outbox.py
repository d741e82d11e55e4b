"""The outbox the Milvus vector backend copies chunk writes from (RAG_VECTOR_BACKEND=milvus).

The database writes it (triggers, in the transaction that writes the chunks), so every way of writing a chunk
reaches Milvus: inserts, deletes (cascades included), an embedding rewritten in place, and a document moved to
another collection or team (the chunks' scalar fields in Milvus follow). The triggers are created disabled: the
pgvector backend pays nothing for them. rag.corpus.milvus.set_outbox_triggers switches them on after `migrate`
when the backend is milvus (and off again when it is not).
"""

from django.db import migrations, models
import django.utils.timezone

TRIGGERS = """
CREATE FUNCTION rag_vector_outbox_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rag_vector_outbox (chunk_id, created_at) SELECT id, now() FROM changed;
  RETURN NULL;
END $$;
CREATE TRIGGER rag_vector_outbox_insert
AFTER INSERT ON document_embeddings REFERENCING NEW TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION rag_vector_outbox_inserted();
CREATE TRIGGER rag_vector_outbox_delete
AFTER DELETE ON document_embeddings REFERENCING OLD TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION rag_vector_outbox_inserted();

CREATE FUNCTION rag_vector_outbox_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rag_vector_outbox (chunk_id, created_at) VALUES (NEW.id, now());
  RETURN NULL;
END $$;
CREATE TRIGGER rag_vector_outbox_update
AFTER UPDATE OF embedding, model_id, document_id, document_version, team_id ON document_embeddings
FOR EACH ROW EXECUTE FUNCTION rag_vector_outbox_updated();

CREATE FUNCTION rag_vector_outbox_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rag_vector_outbox (chunk_id, created_at) SELECT id, now() FROM document_embeddings WHERE document_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER rag_vector_outbox_move
AFTER UPDATE OF collection_id, team_id ON documents_document
FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id OR OLD.team_id IS DISTINCT FROM NEW.team_id)
EXECUTE FUNCTION rag_vector_outbox_moved();

ALTER TABLE document_embeddings DISABLE TRIGGER rag_vector_outbox_insert;
ALTER TABLE document_embeddings DISABLE TRIGGER rag_vector_outbox_delete;
ALTER TABLE document_embeddings DISABLE TRIGGER rag_vector_outbox_update;
ALTER TABLE documents_document DISABLE TRIGGER rag_vector_outbox_move;
"""
DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS rag_vector_outbox_move ON documents_document;
DROP FUNCTION IF EXISTS rag_vector_outbox_moved();
DROP TRIGGER IF EXISTS rag_vector_outbox_update ON document_embeddings;
DROP FUNCTION IF EXISTS rag_vector_outbox_updated();
DROP TRIGGER IF EXISTS rag_vector_outbox_delete ON document_embeddings;
DROP TRIGGER IF EXISTS rag_vector_outbox_insert ON document_embeddings;
DROP FUNCTION IF EXISTS rag_vector_outbox_inserted();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0006_document_tags"),
        ("rag", "0023_entity_kind_symbol"),
    ]

    operations = [
        migrations.CreateModel(
            name="VectorOutbox",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("chunk_id", models.BigIntegerField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "db_table": "rag_vector_outbox",
                "db_table_comment": "Chunks whose vectors Milvus must copy or drop (RAG_VECTOR_BACKEND=milvus).",
            },
        ),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]
