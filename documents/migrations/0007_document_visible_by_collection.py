"""Search's visible set reads the documents of each readable collection from one index, without their rows."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0006_document_tags"),
        ("permissions", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(("archived_at__isnull", True), ("deleted_at__isnull", True)),
                fields=["collection", "team"],
                include=("id", "version", "published_at", "created_by"),
                name="document_visible_by_collection",
            ),
        ),
    ]
