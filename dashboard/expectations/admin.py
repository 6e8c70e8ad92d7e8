from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.expectations.forms import MaintenanceWindowForm, StreamObjectiveForm
from dashboard.expectations.models import MaintenanceWindow, StreamObjective


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    form = MaintenanceWindowForm
    list_display = ("name", "scope", "scope_value", "schedule", "starts_at", "ends_at", "created_by")
    list_filter = ("scope",)
    search_fields = ("name", "scope_value")
    readonly_fields = ("created_by", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "scope", "scope_value", "reason")}),
        ("One-off", {"fields": ("starts_at", "ends_at")}),
        ("Recurring", {"fields": ("cron", "duration_minutes", "time_zone")}),
        ("Recorded", {"fields": ("created_by", "created_at")}),
    )

    @admin.display(description="Schedule")
    def schedule(self, window: MaintenanceWindow) -> str:
        return window.describe_schedule()

    def save_model(self, request: HttpRequest, obj: MaintenanceWindow, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user.get_username()[:150]
        super().save_model(request, obj, form, change)


@admin.register(StreamObjective)
class StreamObjectiveAdmin(admin.ModelAdmin):
    """A stream's own objectives; the stream page shows the budget they give."""

    form = StreamObjectiveForm
    list_display = ("stream_id", "delivery", "delivery_target", "latency_seconds", "latency_target", "updated_by",
                    "updated_at")
    search_fields = ("stream_id",)
    readonly_fields = ("updated_by", "updated_at")

    def save_model(self, request: HttpRequest, obj: StreamObjective, form: Any, change: bool) -> None:
        obj.updated_by = request.user.get_username()[:150]
        super().save_model(request, obj, form, change)
