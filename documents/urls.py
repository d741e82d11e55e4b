from django.urls import path

from documents import apis

urlpatterns = [
    path("documents.create", apis.DocumentCreateApi.as_view()),
    path("documents.info", apis.DocumentInfoApi.as_view()),
    path("documents.list", apis.DocumentListApi.as_view()),
    path("documents.update", apis.DocumentUpdateApi.as_view()),
    path("documents.delete", apis.DocumentDeleteApi.as_view()),
    path("documents.archive", apis.DocumentArchiveApi.as_view()),
    path("documents.unarchive", apis.DocumentUnarchiveApi.as_view()),
    path("documents.publish", apis.DocumentPublishApi.as_view()),
    path("documents.versions", apis.DocumentVersionsApi.as_view()),
    path("documents.version", apis.DocumentVersionApi.as_view()),
    path("documents.add_user", apis.DocumentAddUserApi.as_view()),
    path("documents.remove_user", apis.DocumentRemoveUserApi.as_view()),
    path("documents.import", apis.DocumentImportApi.as_view()),
    path("tags.list", apis.TagListApi.as_view()),
    path("jobs.info", apis.JobInfoApi.as_view()),
    path("jobs.list", apis.JobListApi.as_view()),
    path("collections.create", apis.CollectionCreateApi.as_view()),
    path("collections.list", apis.CollectionListApi.as_view()),
    path("collections.info", apis.CollectionInfoApi.as_view()),
    path("collections.update", apis.CollectionUpdateApi.as_view()),
    path("collections.delete", apis.CollectionDeleteApi.as_view()),
    path("collections.add_user", apis.CollectionAddUserApi.as_view()),
    path("collections.remove_user", apis.CollectionRemoveUserApi.as_view()),
    path("collections.add_group", apis.CollectionAddGroupApi.as_view()),
    path("collections.remove_group", apis.CollectionRemoveGroupApi.as_view()),
]
