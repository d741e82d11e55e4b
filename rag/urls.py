from django.urls import path

from rag.api import answer, conversations, graph, search

urlpatterns = [
    path("rag.search", search.RagSearchApi.as_view()),
    path("rag.status", search.RagStatusApi.as_view()),
    path("rag.embed", search.RagEmbedApi.as_view()),
    path("rag.answer", answer.RagAnswerApi.as_view()),
    path("rag.feedback", answer.RagFeedbackApi.as_view()),
    path("conversations.list", conversations.ConversationListApi.as_view()),
    path("conversations.info", conversations.ConversationInfoApi.as_view()),
    path("conversations.update", conversations.ConversationUpdateApi.as_view()),
    path("conversations.delete", conversations.ConversationDeleteApi.as_view()),
    path("graph.entities", graph.GraphEntitiesApi.as_view()),
    path("graph.entity", graph.GraphEntityApi.as_view()),
    path("graph.passage", graph.GraphPassageApi.as_view()),
]
