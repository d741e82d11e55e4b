from django.urls import path

from rag import answer_apis, apis

urlpatterns = [
    path("rag.search", apis.RagSearchApi.as_view()),
    path("rag.status", apis.RagStatusApi.as_view()),
    path("rag.embed", apis.RagEmbedApi.as_view()),
    path("rag.answer", answer_apis.RagAnswerApi.as_view()),
    path("rag.feedback", answer_apis.RagFeedbackApi.as_view()),
]
