from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.accounts.models import OidcIdentity


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Who signs in through the identity provider, as which user; written by sign-ins only."""

    list_display = ("user", "subject", "issuer", "groups", "last_sign_in_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "groups", "created_at", "last_sign_in_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
