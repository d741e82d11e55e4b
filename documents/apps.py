from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Collections and documents"

    def ready(self) -> None:
        from documents import signals  # noqa: F401
