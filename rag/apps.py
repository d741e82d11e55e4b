from django.apps import AppConfig


class RagConfig(AppConfig):
    name = "rag"
    verbose_name = "Search and answers"

    def ready(self) -> None:
        from rag import receivers  # noqa: F401
