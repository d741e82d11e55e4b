from __future__ import annotations

import factory
from django.utils import timezone

from documents.models import (
    Collection,
    CollectionMembership,
    Document,
    DocumentMembership,
    DocumentVersion,
)
from permissions.models import Access, Group, GroupMembership, Role, Team, TeamRole, User


class TeamFactory(factory.django.DjangoModelFactory[Team]):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    team = factory.SubFactory(TeamFactory)
    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "password")

    class Params:
        # UserFactory(is_team_admin=True) makes an admin; role=TeamRole.READ_ONLY a read-only member.
        is_team_admin = factory.Trait(role=TeamRole.ADMIN)


class GroupFactory(factory.django.DjangoModelFactory[Group]):
    class Meta:
        model = Group

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"Group {n}")


class GroupMembershipFactory(factory.django.DjangoModelFactory[GroupMembership]):
    class Meta:
        model = GroupMembership


class CollectionFactory(factory.django.DjangoModelFactory[Collection]):
    class Meta:
        model = Collection

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"Collection {n}")
    default_access = Access.READ


class CollectionMembershipFactory(factory.django.DjangoModelFactory[CollectionMembership]):
    class Meta:
        model = CollectionMembership

    role = Role.READ


class DocumentFactory(factory.django.DjangoModelFactory[Document]):
    class Meta:
        model = Document
        skip_postgeneration_save = True

    collection = factory.SubFactory(CollectionFactory)
    team = factory.LazyAttribute(lambda o: o.collection.team)
    title = factory.Sequence(lambda n: f"Document {n}")
    text = "Some text."
    published_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def history(obj: Document, create: bool, extracted: object, **kwargs: object) -> None:
        """Its title and text as the first entry of its history, as documents.services.document_create writes it."""
        if create:
            DocumentVersion.objects.create(
                document=obj,
                version=obj.version,
                title=obj.title,
                text=obj.text,
                created_by=obj.created_by,
                created_at=obj.updated_at,
            )


class DocumentMembershipFactory(factory.django.DjangoModelFactory[DocumentMembership]):
    class Meta:
        model = DocumentMembership

    role = Role.READ
