from django.urls import path

from permissions import apis

urlpatterns = [
    path("apiKeys.create", apis.ApiTokenCreateApi.as_view()),
    path("apiKeys.list", apis.ApiTokenListApi.as_view()),
    path("apiKeys.revoke", apis.ApiTokenRevokeApi.as_view()),
]
