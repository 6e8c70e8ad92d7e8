from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "dashboard.accounts"
    label = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        from dashboard.accounts import roles

        # Runs after every migrate and after the test runner's flushes, so the two groups always
        # exist and pick up the permissions of models added later (alert rules and so on).
        post_migrate.connect(roles.sync_roles_after_migrate, sender=self, dispatch_uid="accounts-sync-roles")
