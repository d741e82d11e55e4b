from django.urls import path

from permissions import apis

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
]
