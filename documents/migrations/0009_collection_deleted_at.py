"""A collection deleted with its documents is kept, marked deleted, so an operator can restore both."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0008_task_recovery"),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
