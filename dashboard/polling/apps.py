from __future__ import annotations

from django.apps import AppConfig


class PollingConfig(AppConfig):
    name = "dashboard.polling"
    label = "polling"
    verbose_name = "Polling"
