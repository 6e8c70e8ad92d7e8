from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
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
        unknown = sorted({role for role in settings.OIDC_ROLE_MAP.values() if role not in roles.ROLES})
        if unknown:
            raise ImproperlyConfigured(
                f"OIDC_ROLE_MAP names unknown roles {', '.join(unknown)}; the roles are {', '.join(roles.ROLES)}"
            )
