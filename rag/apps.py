from django.apps import AppConfig


class RagConfig(AppConfig):
    name = "rag"
    verbose_name = "Search and answers"

    def ready(self) -> None:
        from config.metrics import register_scrape_collector
        from documents.index_state import register_index_state_reader
        from documents.ingestion.jobs import register_index_probe
        from rag import receivers, warmup  # noqa: F401
        from rag.indexing.index_status import IndexCollector, document_index_state, index_progress

        # An import job is done once the index has caught up with the documents it wrote.
        register_index_probe(index_progress)
        # The document page shows whether its latest version is searchable yet.
        register_index_state_reader(document_index_state)
        # /metrics reads the index states and the queue's length at each scrape.
        register_scrape_collector(IndexCollector())
        # Servers load the model (and LiteLLM, when configured) before they serve: config.warmup.
        warmup.register()
