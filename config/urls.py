from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from config.health import health
from config.metrics import metrics_view
from connectors.pages import sources_page
from documents.pages import document_by_title, document_original, document_page, import_page
from permissions.oidc import sso_callback_page, sso_start_page
from permissions.pages import admin_login_page, login_page, logout_page
from permissions.password_reset import (
    password_reset_complete_page,
    password_reset_confirm_page,
    password_reset_page,
    password_reset_sent_page,
)
from rag.library_pages import collection_page, documents_page, search_page
from rag.mcp.views import McpApi
from rag.pages import ask_page, graph_page

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="rag", permanent=False)),
    # The admin signs in through the same throttled page.
    path("admin/login/", admin_login_page),
    path("admin/", admin.site.urls),
    path("health", health),
    path("metrics", metrics_view, name="metrics"),
    path("rag", ask_page, name="rag"),
    path("graph", graph_page, name="graph"),
    path("search", search_page, name="search"),
    path("documents", documents_page, name="documents"),
    path("collections/<uuid:collection_id>", collection_page, name="collection"),
    path("doc/<uuid:document_id>", document_page, name="document"),
    path("doc/title/<path:title>", document_by_title, name="document-by-title"),
    path("doc/<uuid:document_id>/original", document_original, name="document-original"),
    path("doc/<uuid:document_id>/", include("documents.page_urls")),
    path("import", import_page, name="import"),
    path("sources", sources_page, name="sources"),
    path("login", login_page, name="login"),
    path("logout", logout_page, name="logout"),
    path("", include("documents.collection_pages")),
    path("", include("permissions.team_pages")),
    # Single sign-on (permissions.oidc); the callback is the redirect URI registered at the provider.
    path("login/sso", sso_start_page, name="oidc-start"),
    path("login/sso/callback", sso_callback_page, name="oidc-callback"),
    path("password-reset", password_reset_page, name="password_reset"),
    path("password-reset/sent", password_reset_sent_page, name="password_reset_done"),
    path("password-reset/done", password_reset_complete_page, name="password_reset_complete"),
    path("password-reset/<uidb64>/<token>", password_reset_confirm_page, name="password_reset_confirm"),
    path("", include("permissions.members.urls")),
    path("mcp", McpApi.as_view(), name="mcp"),
    path("api/schema", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("api/schema/docs", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]), name="schema-docs"),
    path("api/", include("permissions.urls")),
    path("api/", include("documents.urls")),
    path("api/", include("connectors.urls")),
    path("api/", include("rag.urls")),
]

handler403 = "config.error_pages.permission_denied"
handler404 = "config.error_pages.page_not_found"
handler500 = "config.error_pages.server_error"
