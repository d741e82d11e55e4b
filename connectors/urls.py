from django.urls import path

from connectors import apis

urlpatterns = [
    path("sources.kinds", apis.SourceKindsApi.as_view()),
    path("sources.list", apis.SourceListApi.as_view()),
    path("sources.info", apis.SourceInfoApi.as_view()),
    path("sources.syncs", apis.SourceSyncsApi.as_view()),
    path("sources.create", apis.SourceCreateApi.as_view()),
    path("sources.update", apis.SourceUpdateApi.as_view()),
    path("sources.delete", apis.SourceDeleteApi.as_view()),
    path("sources.sync", apis.SourceSyncApi.as_view()),
    path("sources.pause", apis.SourcePauseApi.as_view()),
    path("sources.resume", apis.SourceResumeApi.as_view()),
    path("sources.upload", apis.SourceUploadApi.as_view()),
]
