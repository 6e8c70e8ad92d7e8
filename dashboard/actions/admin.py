"""The audit in the admin: every action and replayed delivery, read-only (no add, change or delete)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.actions.models import ProviderAction, ReplayItem


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReplayItemInline(admin.TabularInline):  # type: ignore[type-arg]
    model = ReplayItem
    fields = (
        "delivery_id", "stream_id", "block_number", "status_before", "state", "delivered", "answer", "sent_at",
        "answered_at",
    )
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ProviderAction)
class ProviderActionAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "kind", "requested_by_name", "state", "target_count", "scope")
    list_filter = ("kind", "state")
    search_fields = ("stream_id", "requested_by_name")
    readonly_fields = [f.name for f in ProviderAction._meta.fields]
    inlines = [ReplayItemInline]
    show_full_result_count = False


@admin.register(ReplayItem)
class ReplayItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "action", "delivery_id", "state", "delivered", "answered_at")
    list_filter = ("state",)
    search_fields = ("=delivery_id", "=stream_id")
    readonly_fields = [f.name for f in ReplayItem._meta.fields]
    list_select_related = ("action",)
    show_full_result_count = False
