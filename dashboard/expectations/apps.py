from django.apps import AppConfig


class ExpectationsConfig(AppConfig):
    name = "dashboard.expectations"
    label = "expectations"
    verbose_name = "Expectations: maintenance windows"
