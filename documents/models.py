from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Exists, Lookup, OuterRef, Q
from django.utils import timezone

from permissions.models import Access, GroupMembership, Role, Team


class AnyOf(Lookup):
    """`field = ANY(ARRAY(subquery))`: the subquery runs once and the comparison can use an index.

    (`field IN (subquery)` inside an OR becomes a hashed subplan checked against every row of
    the team's documents: a sequential scan of a wide table on every search.)
    """

    lookup_name = "any_of"

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        rhs = rhs.strip()
        if not rhs.startswith("("):
            rhs = f"({rhs})"
        return f"{lhs} = ANY(ARRAY{rhs})", [*lhs_params, *rhs_params]


models.UUIDField.register_lookup(AnyOf)
models.ForeignKey.register_lookup(AnyOf)


class CollectionQuerySet(models.QuerySet):
    def visible_to(self, user) -> CollectionQuerySet:
        """Collections the user may read: team default access or a membership (direct or group)."""
        if user is None or not user.is_authenticated or user.team_id is None:
            return self.none()
        member = CollectionMembership.objects.filter(collection_id=OuterRef("pk")).filter(
            Q(user_id=user.pk) | Q(group_id__in=GroupMembership.objects.filter(user_id=user.pk).values("group_id"))
        )
        return self.filter(team_id=user.team_id).filter(Q(default_access__in=[Access.READ, Access.READ_WRITE]) | Exists(member))


class Collection(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    default_access = models.CharField(
        max_length=12,
        choices=Access.choices,
        default=Access.READ_WRITE,
        help_text="What every member of the team may do without a membership.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = CollectionQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name


class CollectionMembership(models.Model):
    """A user's or a group's role in one collection."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    group = models.ForeignKey(
        "permissions.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False),
                name="collection_membership_user_xor_group",
            ),
            models.UniqueConstraint(fields=["collection", "user"], name="unique_collection_user"),
            models.UniqueConstraint(fields=["collection", "group"], name="unique_collection_group"),
        ]


class DocumentQuerySet(models.QuerySet):
    def visible_to(self, user, *, include_archived: bool = False) -> DocumentQuerySet:
        """The one access policy, in SQL (DESIGN.md "Who sees what")."""
        if user is None or not user.is_authenticated or user.team_id is None:
            return self.none()
        readable_collections = Collection.objects.visible_to(user).values("id")
        shared_with_user = DocumentMembership.objects.filter(user_id=user.pk).values("document_id")
        qs = self.filter(team_id=user.team_id, deleted_at__isnull=True).filter(
            Q(published_at__isnull=False) | Q(created_by_id=user.pk)
        )
        if not include_archived:
            qs = qs.filter(archived_at__isnull=True)
        # Access through the collection (the team's default or a membership, see
        # CollectionQuerySet.visible_to) or a document membership.
        return qs.filter(Q(collection_id__any_of=readable_collections) | Q(pk__any_of=shared_with_user))


class Document(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="documents")
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="documents")
    title = models.CharField(max_length=500)
    text = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1, help_text="Bumped on every content change.")
    created_by = models.ForeignKey(
        # Blank too: a document outlives its author, and must stay editable when the author is deleted.
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="created_documents",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = DocumentQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["team", "collection"], name="document_team_collection"),
            models.Index(fields=["team", "updated_at"], name="document_team_updated"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def url(self) -> str:
        return f"/doc/{self.id}"


class DocumentMembership(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="document_memberships")
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "user"], name="unique_document_user")]


class IdempotentRequest(models.Model):
    """A write sent with an `Idempotency-Key`: a retry with the same key and body gets the stored response back."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    endpoint = models.CharField(max_length=100)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the request body as parsed JSON, keys sorted.")
    status = models.PositiveSmallIntegerField(default=0)
    response = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "idempotent_requests"
        constraints = [models.UniqueConstraint(fields=["user", "endpoint", "key"], name="unique_idempotency_key")]
