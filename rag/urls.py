from django.urls import path

from rag import apis

urlpatterns = [
    path("rag.search", apis.RagSearchApi.as_view()),
    path("rag.status", apis.RagStatusApi.as_view()),
    path("rag.embed", apis.RagEmbedApi.as_view()),
]
