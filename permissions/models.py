from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Team(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # Offered on the /rag page of an empty conversation; none by default, as only the team knows what it asks.
    example_questions = models.JSONField(
        default=list, blank=True, help_text="Questions the /rag page offers to ask, as a list of strings (at most 6 shown)."
    )

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        questions = self.example_questions
        if not isinstance(questions, list) or not all(isinstance(q, str) and 0 < len(q) <= 300 for q in questions):
            raise ValidationError({"example_questions": "A list of questions, each a string of 1 to 300 characters."})


class TeamRole(models.TextChoices):
    """What a person may do in their team; which documents they read is the collections' and memberships' business."""

    ADMIN = "admin", "Admin"  # manages the team's collections and members, and writes where a member may
    MEMBER = "member", "Member"  # writes where a collection or membership lets them
    READ_ONLY = "read_only", "Read-only"  # reads what they may, changes nothing (permissions.policy.can_write)


class User(AbstractUser):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Null only for operators created with createsuperuser; a user without a team sees no documents.
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT, related_name="users")
    role = models.CharField(max_length=10, choices=TeamRole.choices, default=TeamRole.MEMBER)

    @property
    def is_team_admin(self) -> bool:
        return self.role == TeamRole.ADMIN


class Group(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(User, through="GroupMembership", related_name="member_groups")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_group_name_per_team")]

    def __str__(self) -> str:
        return self.name


class GroupMembership(models.Model):
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="group_memberships")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "user"], name="unique_group_member")]


class Access(models.TextChoices):
    """What a collection grants the whole team, or a membership grants its holder."""

    NONE = "none", "No access"
    READ = "read", "Read"
    READ_WRITE = "read_write", "Read and write"


class Role(models.TextChoices):
    READ = "read", "Read"
    READ_WRITE = "read_write", "Read and write"


class TokenScope(models.TextChoices):
    READ = "read", "Read"
    WRITE = "write", "Read and write"


class ApiToken(models.Model):
    """An API token, stored as its public prefix and a keyed digest of the whole secret.

    A token created through the API by another token is that token's child: it never has a wider
    scope nor a later expiry, and it is refused once any token above it is revoked or expired.
    A token a person creates (a signed-in page, the admin, `create_token`) has no parent.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="children",
        help_text="The token that created this one through the API; empty for a token a person created.",
    )
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=32, unique=True)
    digest = models.CharField(max_length=64)
    scope = models.CharField(max_length=10, choices=TokenScope.choices, default=TokenScope.READ)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def can_write(self) -> bool:
        return self.scope == TokenScope.WRITE


class ExternalIdentity(models.Model):
    """A person's account at the single sign-on provider (its issuer and subject), linked to a Cairn user.

    Sign-in finds the user by this link, never by a name or an address the provider may let people change.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="external_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "external identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="unique_external_identity")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class InviteQuerySet(models.QuerySet):
    def pending(self) -> InviteQuerySet:
        """Neither accepted, revoked nor expired: the invites whose link still works."""
        return self.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())


class InviteStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class Invite(models.Model):
    """A link that lets one person join a team with a role, once, until it expires.

    Only a keyed digest of the link's secret is stored (permissions.tokens.token_digest): the link is shown
    once, to whoever created it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invites")
    email = models.EmailField(blank=True, help_text="Whom the link is for; a note, not checked when it is accepted.")
    role = models.CharField(max_length=10, choices=TeamRole.choices, default=TeamRole.MEMBER)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InviteQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.get_role_display()} invite to {self.team}" + (f" for {self.email}" if self.email else "")

    @property
    def status(self) -> InviteStatus:
        if self.accepted_at is not None:
            return InviteStatus.ACCEPTED
        if self.revoked_at is not None:
            return InviteStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InviteStatus.EXPIRED
        return InviteStatus.PENDING
