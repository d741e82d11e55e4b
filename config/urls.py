from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from config.health import health
from rag import views as rag_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health", health),
    path("rag", rag_views.ask_page, name="rag"),
    path("doc/<uuid:document_id>", rag_views.document_page, name="document"),
    path("login", rag_views.login_page, name="login"),
    path("logout", rag_views.logout_page, name="logout"),
    path("api/schema", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("api/schema/docs", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]), name="schema-docs"),
    path("api/", include("permissions.urls")),
    path("api/", include("documents.urls")),
    path("api/", include("rag.urls")),
]
