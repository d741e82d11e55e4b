"""Recompute existing chunks' keyword columns now that they include the headings above each chunk."""
from django.db import migrations

BATCH = 1000


def refresh(apps, schema_editor):
    from rag.keyword import refresh_search_vectors

    DocumentEmbedding = apps.get_model("rag", "DocumentEmbedding")
    ids = list(DocumentEmbedding.objects.order_by().values_list("document_id", flat=True).distinct())
    for i in range(0, len(ids), BATCH):
        refresh_search_vectors(document_ids=ids[i : i + BATCH])


class Migration(migrations.Migration):

    dependencies = [("rag", "0004_embedding_storage_main")]

    operations = [migrations.RunPython(refresh, migrations.RunPython.noop)]
