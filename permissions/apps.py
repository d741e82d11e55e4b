from django.apps import AppConfig


class PermissionsConfig(AppConfig):
    name = "permissions"
    verbose_name = "Teams, users and API tokens"
