# A user's place in their team becomes a role (admin, member, read-only) instead of an admin flag, and
# teams invite people by link. Team admins keep their rights: is_team_admin = true becomes role "admin".

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

ROLES = [("admin", "Admin"), ("member", "Member"), ("read_only", "Read-only")]


class Migration(migrations.Migration):
    dependencies = [
        ("permissions", "0004_external_identity"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="role",
            field=models.CharField(choices=ROLES, default="member", max_length=10),
        ),
        migrations.RunSQL(
            sql="UPDATE permissions_user SET role = 'admin' WHERE is_team_admin",
            reverse_sql="UPDATE permissions_user SET is_team_admin = (role = 'admin')",
        ),
        migrations.RemoveField(model_name="user", name="is_team_admin"),
        migrations.CreateModel(
            name="Invite",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                (
                    "email",
                    models.EmailField(
                        blank=True, help_text="Whom the link is for; a note, not checked when it is accepted.", max_length=254
                    ),
                ),
                ("role", models.CharField(choices=ROLES, default="member", max_length=10)),
                ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires_at", models.DateTimeField()),
                ("accepted_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "accepted_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
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
                    "team",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="invites", to="permissions.team"),
                ),
            ],
        ),
    ]
