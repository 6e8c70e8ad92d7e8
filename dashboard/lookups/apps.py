from django.apps import AppConfig


class LookupsConfig(AppConfig):
    name = "dashboard.lookups"
    label = "lookups"
    verbose_name = "Owner and creator lookups"
