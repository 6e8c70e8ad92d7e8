from __future__ import annotations

from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "dashboard.sources"
    label = "sources"
    verbose_name = "Upstream sources"
