import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0002_querylog_feedback_querylog_querylog_team_created_and_more"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="documentembedding",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search_vector"], name="embedding_search_vector_gin"),
        ),
    ]
