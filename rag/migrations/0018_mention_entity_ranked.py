"""An entity's mentions indexed in the order the graph ranks its passages (its own document's first, then those
naming it most), so the ranking stops at the few it keeps instead of sorting every mention of a hub."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0017_chunk_sign_bits"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="mention",
            name="mention_entity_covering",
        ),
        migrations.AddIndex(
            model_name="mention",
            index=models.Index(
                fields=["entity", "model_id", "-subject", "-count", "chunk"],
                include=("document_id", "document_version", "title_only"),
                name="mention_entity_ranked",
            ),
        ),
    ]
