from django.apps import AppConfig


class ActionsConfig(AppConfig):
    name = "dashboard.actions"
    label = "actions"
    verbose_name = "Actions at the provider"
