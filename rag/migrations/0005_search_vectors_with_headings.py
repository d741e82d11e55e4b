"""Index statuses carry the keyword length; existing chunks' keyword columns are recomputed with their headings."""
from django.db import migrations, models

BATCH = 1000


def refresh(apps, schema_editor):
    from rag.indexing.keyword_postings import refresh_search_vectors

    DocumentEmbedding = apps.get_model("rag", "DocumentEmbedding")
    ids = list(DocumentEmbedding.objects.order_by().values_list("document_id", flat=True).distinct())
    for i in range(0, len(ids), BATCH):
        refresh_search_vectors(document_ids=ids[i : i + BATCH])


class Migration(migrations.Migration):

    dependencies = [("rag", "0004_embedding_storage_main")]

    operations = [
        migrations.AddField(
            model_name="indexstatus", name="keyword_length", field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(refresh, migrations.RunPython.noop),
    ]
