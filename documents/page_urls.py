"""The document page's own pages and forms, under /doc/<id>/ (the page itself and its original are in config.urls)."""

from django.urls import path

from documents import pages

urlpatterns = [
    path("edit", pages.document_edit_page, name="document-edit"),
    path("preview", pages.document_preview, name="document-preview"),
    path("index-state", pages.document_index_state, name="document-index-state"),
    path("move", pages.document_move_page, name="document-move"),
    path("tags", pages.document_tags_page, name="document-tags"),
    path("archive", pages.document_archive_page, name="document-archive"),
    path("unarchive", pages.document_unarchive_page, name="document-unarchive"),
    path("delete", pages.document_delete_page, name="document-delete"),
    path("versions/<uuid:entry_id>", pages.document_version_page, name="document-version"),
    path("versions/<uuid:entry_id>/restore", pages.document_version_restore, name="document-version-restore"),
]
