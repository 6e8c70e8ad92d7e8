from __future__ import annotations

from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    name = "dashboard.devtools"
    label = "devtools"
    verbose_name = "Development tools"
