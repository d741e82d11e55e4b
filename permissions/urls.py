from django.urls import path

from permissions import apis
from permissions.members import apis as members

urlpatterns = [
    path("apiKeys.create", apis.ApiTokenCreateApi.as_view()),
    path("apiKeys.list", apis.ApiTokenListApi.as_view()),
    path("apiKeys.revoke", apis.ApiTokenRevokeApi.as_view()),
    path("groups.list", apis.GroupListApi.as_view()),
    path("groups.info", apis.GroupInfoApi.as_view()),
    path("groups.create", apis.GroupCreateApi.as_view()),
    path("groups.update", apis.GroupUpdateApi.as_view()),
    path("groups.delete", apis.GroupDeleteApi.as_view()),
    path("groups.add_user", apis.GroupAddUserApi.as_view()),
    path("groups.remove_user", apis.GroupRemoveUserApi.as_view()),
    path("users.list", members.UserListApi.as_view()),
    path("users.info", members.UserInfoApi.as_view()),
    path("users.update", members.UserUpdateApi.as_view()),
    path("users.deactivate", members.UserDeactivateApi.as_view()),
    path("users.activate", members.UserActivateApi.as_view()),
    path("invites.create", members.InviteCreateApi.as_view()),
    path("invites.list", members.InviteListApi.as_view()),
    path("invites.revoke", members.InviteRevokeApi.as_view()),
]
