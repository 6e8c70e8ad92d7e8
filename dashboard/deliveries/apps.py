from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "dashboard.deliveries"
    label = "deliveries"
    verbose_name = "Deliveries"
