"""The model of a chunk is called Chunk (its table stays document_embeddings, now with a comment)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0002_initial"),
        ("rag", "0006_keyword_postings"),
    ]

    operations = [
        migrations.RenameModel("DocumentEmbedding", "Chunk"),
        migrations.AlterField(
            model_name="chunk",
            name="document",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="chunks", to="documents.document"
            ),
        ),
        migrations.AlterModelTableComment(
            name="chunk",
            table_comment="Chunks: one row per chunk of one document version and one embedding model.",
        ),
    ]
