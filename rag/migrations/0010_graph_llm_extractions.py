"""The `llm` graph extractor: typed entity kinds (a longer kind column; widening a varchar rewrites
nothing) and the cache of its validated answers, by extractor and chunk content hash."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rag", "0009_feedback_uuid_one_per_answer"),
    ]

    operations = [
        migrations.AlterField(
            model_name="entity",
            name="kind",
            field=models.CharField(
                choices=[
                    ("document", "Document"),
                    ("name", "Proper name"),
                    ("topic", "Heading or key phrase"),
                    ("code", "Code identifier"),
                    ("person", "Person"),
                    ("organization", "Organization"),
                    ("location", "Location"),
                    ("product", "Product"),
                    ("technology", "Technology"),
                    ("concept", "Concept"),
                    ("event", "Event"),
                ],
                max_length=20,
            ),
        ),
        migrations.CreateModel(
            name="GraphExtraction",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                (
                    "extractor",
                    models.CharField(
                        help_text="llm-v<prompt version>:<model>; another model or prompt reads again.", max_length=250
                    ),
                ),
                (
                    "content_hash",
                    models.CharField(
                        help_text="The chunk's content_hash (SHA-256 of what was embedded and read).", max_length=64
                    ),
                ),
                (
                    "facts",
                    models.JSONField(
                        help_text='{"entities": [{"name", "type"}], "relations": [{"source", "target", "predicate", "confidence"}]}'
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "db_table": "graph_llm_extractions",
                "db_table_comment": "Cache of the llm graph extractor's validated answers, by extractor and chunk content hash.",
                "constraints": [models.UniqueConstraint(fields=("extractor", "content_hash"), name="unique_extraction_per_text")],
            },
        ),
    ]
