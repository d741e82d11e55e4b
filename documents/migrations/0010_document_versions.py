"""Document history: one row per title or text change, the current state of every document written as its first."""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

# Who wrote an existing document's current text is known only for its first version (its creator).
BACKFILL = """
INSERT INTO documents_documentversion (id, document_id, version, title, text, created_by_id, created_at)
SELECT gen_random_uuid(), d.id, d.version, d.title, d.text, CASE WHEN d.version = 1 THEN d.created_by_id END, d.updated_at
FROM documents_document d
"""


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0009_collection_deleted_at"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="DocumentVersion",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("version", models.PositiveIntegerField()),
                ("title", models.CharField(max_length=500)),
                ("text", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "document",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="versions", to="documents.document"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["document", "version", "created_at"], name="document_version_order")],
            },
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
