from django.db import migrations


class Migration(migrations.Migration):
    """Keep each vector inline in its row.

    pgvector's type allows out-of-line (TOAST) storage, and our rows (chunk text, tsvector,
    vector) pass the 2 kB threshold, so vectors were moved to the TOAST table and every exact
    distance paid a second lookup. MAIN keeps the vector in the row and lets the text columns
    be compressed or moved out first. It applies to rows written from now on; `VACUUM FULL
    document_embeddings` (or reindexing) rewrites old ones.
    """

    dependencies = [("rag", "0003_embedding_search_vector_gin")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE document_embeddings ALTER COLUMN embedding SET STORAGE MAIN",
            "ALTER TABLE document_embeddings ALTER COLUMN embedding SET STORAGE EXTERNAL",
        ),
    ]
