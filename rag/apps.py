from django.apps import AppConfig


class RagConfig(AppConfig):
    name = "rag"
    verbose_name = "Search and answers"

    def ready(self) -> None:
        from documents.ingestion.jobs import register_index_probe
        from rag import receivers  # noqa: F401
        from rag.indexing.progress import documents_awaiting_index

        # An import job is done once the index has caught up with the documents it wrote.
        register_index_probe(documents_awaiting_index)
