"""Outline-style RPC endpoints for documents and collections: POST /api/<resource>.<verb>."""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import Forbidden
from documents import selectors, services
from documents.models import Collection, Document
from permissions.apis import validated as _validated
from permissions.models import Access, Role
from permissions.policy import (
    can_manage_collections,
    can_write_collection,
    can_write_document,
)


class DocumentOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    text = serializers.CharField()
    collectionId = serializers.UUIDField(source="collection_id")
    version = serializers.IntegerField()
    url = serializers.CharField()
    createdBy = serializers.UUIDField(source="created_by_id")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    publishedAt = serializers.DateTimeField(source="published_at")
    archivedAt = serializers.DateTimeField(source="archived_at")


class CollectionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    defaultAccess = serializers.CharField(source="default_access")
    createdAt = serializers.DateTimeField(source="created_at")


class PaginationInput(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=100, default=25)
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


class IdInput(serializers.Serializer):
    id = serializers.UUIDField()


class MemberInput(serializers.Serializer):
    id = serializers.UUIDField()
    userId = serializers.UUIDField()


class RoleMemberInput(MemberInput):
    role = serializers.ChoiceField(choices=Role.choices, default=Role.READ)


def _paginated(queryset, output, data: dict) -> Response:
    limit, offset = data["limit"], data["offset"]
    page = list(queryset[offset : offset + limit])
    return Response({"data": output(page, many=True).data, "pagination": {"limit": limit, "offset": offset, "total": queryset.count()}})


def _writable_document(request, document_id) -> Document:
    document = selectors.document_get(user=request.user, document_id=document_id)
    if not can_write_document(request.user, document):
        raise Forbidden("You can read this document but not change it.")
    return document


class RpcApi(APIView):
    """Every RPC endpoint is a POST with a JSON object body."""

    http_method_names = ["post", "options"]


class DocumentCreateApi(RpcApi):
    write_scope = True

    class Input(serializers.Serializer):
        title = serializers.CharField(max_length=500)
        text = serializers.CharField(allow_blank=True, default="", max_length=settings.DOCUMENT_MAX_TEXT_LENGTH, trim_whitespace=False)
        collectionId = serializers.UUIDField()
        publish = serializers.BooleanField(default=False)

    @extend_schema(request=Input, responses=inline_serializer("DocumentResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(self.Input, request)
        collection = selectors.collection_get(user=request.user, collection_id=data["collectionId"])
        if not can_write_collection(request.user, collection):
            raise Forbidden("You can read this collection but not add documents to it.")
        document = services.document_create(
            by=request.user, collection=collection, title=data["title"], text=data["text"], publish=data["publish"]
        )
        return Response({"data": DocumentOutput(document).data})


class DocumentInfoApi(RpcApi):
    @extend_schema(request=IdInput, responses=inline_serializer("DocumentInfoResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(IdInput, request)
        return Response({"data": DocumentOutput(selectors.document_get(user=request.user, document_id=data["id"])).data})


class DocumentListApi(RpcApi):
    class Input(PaginationInput):
        collectionId = serializers.UUIDField(required=False)
        archived = serializers.BooleanField(default=False)

    @extend_schema(request=Input, responses=inline_serializer("DocumentListResponse", {"data": DocumentOutput(many=True)}))
    def post(self, request):
        data = _validated(self.Input, request)
        qs = selectors.document_list(user=request.user, collection_id=data.get("collectionId"), archived=data["archived"])
        return _paginated(qs, DocumentOutput, data)


class DocumentUpdateApi(RpcApi):
    write_scope = True

    class Input(IdInput):
        title = serializers.CharField(max_length=500, required=False)
        text = serializers.CharField(allow_blank=True, required=False, max_length=settings.DOCUMENT_MAX_TEXT_LENGTH, trim_whitespace=False)
        publish = serializers.BooleanField(default=False)

    @extend_schema(request=Input, responses=inline_serializer("DocumentUpdateResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(self.Input, request)
        document = _writable_document(request, data["id"])
        document = services.document_update(
            document=document, by=request.user, title=data.get("title"), text=data.get("text"), publish=data["publish"]
        )
        return Response({"data": DocumentOutput(document).data})


class DocumentLifecycleApi(RpcApi):
    """documents.delete / archive / unarchive / publish: an id in, the document out."""

    write_scope = True
    change = None

    @extend_schema(request=IdInput, responses=inline_serializer("DocumentLifecycleResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(IdInput, request)
        document = _writable_document(request, data["id"])
        document = self.change(document=document, by=request.user)
        return Response({"data": DocumentOutput(document).data})


class DocumentDeleteApi(DocumentLifecycleApi):
    change = staticmethod(services.document_delete)


class DocumentArchiveApi(DocumentLifecycleApi):
    change = staticmethod(services.document_archive)


class DocumentUnarchiveApi(DocumentLifecycleApi):
    change = staticmethod(services.document_unarchive)


class DocumentPublishApi(DocumentLifecycleApi):
    change = staticmethod(services.document_publish)


class DocumentAddUserApi(RpcApi):
    write_scope = True

    @extend_schema(request=RoleMemberInput, responses=inline_serializer("DocumentAddUserResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(RoleMemberInput, request)
        document = _writable_document(request, data["id"])
        member = selectors.team_member_get(user=request.user, user_id=data["userId"])
        services.document_membership_set(document=document, user=member, role=data["role"])
        return Response({"data": DocumentOutput(document).data})


class DocumentRemoveUserApi(RpcApi):
    write_scope = True

    @extend_schema(request=MemberInput, responses=inline_serializer("DocumentRemoveUserResponse", {"data": DocumentOutput()}))
    def post(self, request):
        data = _validated(MemberInput, request)
        document = _writable_document(request, data["id"])
        member = selectors.team_member_get(user=request.user, user_id=data["userId"])
        services.document_membership_remove(document=document, user=member)
        return Response({"data": DocumentOutput(document).data})


class CollectionCreateApi(RpcApi):
    write_scope = True

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(allow_blank=True, default="", max_length=10_000)
        defaultAccess = serializers.ChoiceField(choices=Access.choices, default=Access.READ_WRITE)

    @extend_schema(request=Input, responses=inline_serializer("CollectionResponse", {"data": CollectionOutput()}))
    def post(self, request):
        data = _validated(self.Input, request)
        if not can_manage_collections(request.user):
            raise Forbidden("Only team admins can create collections.")
        collection = services.collection_create(
            by=request.user, name=data["name"], description=data["description"], default_access=data["defaultAccess"]
        )
        return Response({"data": CollectionOutput(collection).data})


class CollectionListApi(RpcApi):
    @extend_schema(request=PaginationInput, responses=inline_serializer("CollectionListResponse", {"data": CollectionOutput(many=True)}))
    def post(self, request):
        data = _validated(PaginationInput, request)
        return _paginated(selectors.collection_list(user=request.user), CollectionOutput, data)


def _managed_collection(request, collection_id) -> Collection:
    collection = selectors.collection_get(user=request.user, collection_id=collection_id)
    if not can_write_collection(request.user, collection):
        raise Forbidden("You can read this collection but not manage its members.")
    return collection


class CollectionAddUserApi(RpcApi):
    write_scope = True

    @extend_schema(request=RoleMemberInput, responses=inline_serializer("CollectionAddUserResponse", {"data": CollectionOutput()}))
    def post(self, request):
        data = _validated(RoleMemberInput, request)
        collection = _managed_collection(request, data["id"])
        member = selectors.team_member_get(user=request.user, user_id=data["userId"])
        services.collection_membership_set(collection=collection, user=member, role=data["role"])
        return Response({"data": CollectionOutput(collection).data})


class CollectionRemoveUserApi(RpcApi):
    write_scope = True

    @extend_schema(request=MemberInput, responses=inline_serializer("CollectionRemoveUserResponse", {"data": CollectionOutput()}))
    def post(self, request):
        data = _validated(MemberInput, request)
        collection = _managed_collection(request, data["id"])
        member = selectors.team_member_get(user=request.user, user_id=data["userId"])
        services.collection_membership_remove(collection=collection, user=member)
        return Response({"data": CollectionOutput(collection).data})
