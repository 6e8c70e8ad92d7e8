"""The dashboard's own permissions. They belong to no table: Django hangs permissions on a model."""

from __future__ import annotations

from django.db import models


class Access(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "dashboard access"
        permissions = [
            ("view_dashboard", "Can read the dashboard and the lookup pages"),
            ("manage_dashboard", "Can manage sources, alert rules and incidents"),
        ]

    def __str__(self) -> str:
        return "dashboard access"
