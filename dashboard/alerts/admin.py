from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from dashboard.alerts import actions
from dashboard.alerts.models import AlertRule, Condition, Incident, Notification, NotificationStatus, Scope
from dashboard.alerts.tasks import dispatch


class AlertRuleForm(forms.ModelForm):
    class Meta:
        model = AlertRule
        fields = (
            "name",
            "enabled",
            "recipients",
            "digest",
            "muted_until",
            "scope",
            "scope_value",
            "condition",
            "window_minutes",
            "threshold_percent",
            "min_deliveries",
            "consecutive_failures",
            "stale_minutes",
            "grace_minutes",
            "cooldown_minutes",
        )

    def clean_recipients(self) -> str:
        recipients: str = self.cleaned_data["recipients"]
        for address in (a.strip() for a in recipients.replace("\n", ",").split(",")):
            if address:
                validate_email(address)
        return recipients

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("condition") == Condition.POLLER_STALE and data.get("scope") != Scope.ALL:
            raise ValidationError(
                {"scope": "The poller-stale condition watches every source; choose Everything."}
            )
        if data.get("scope") != Scope.ALL and not data.get("scope_value"):
            raise ValidationError({"scope_value": "Name the stream id, tag or webhook URL the rule is for."})
        return data


def _mute_action(minutes: int, label: str) -> Callable[..., None]:
    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        until = actions.mute(list(queryset), minutes)
        modeladmin.message_user(
            request, f"Muted {queryset.count()} rule(s) until {until:%Y-%m-%d %H:%M} UTC."
        )

    action.__name__ = f"mute_{minutes}"
    return admin.action(description=f"Mute for {label}")(action)


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    form = AlertRuleForm
    list_display = ("name", "enabled", "condition", "scope", "scope_value", "digest", "muted_until")
    list_filter = ("enabled", "condition", "scope")
    search_fields = ("name",)
    fieldsets = (
        (None, {"fields": ("name", "enabled", "recipients", "digest", "muted_until")}),
        ("Scope", {"fields": ("scope", "scope_value")}),
        (
            "Condition",
            {
                "fields": (
                    "condition",
                    "window_minutes",
                    "threshold_percent",
                    "min_deliveries",
                    "consecutive_failures",
                    "stale_minutes",
                )
            },
        ),
        ("Timing", {"fields": ("grace_minutes", "cooldown_minutes")}),
    )
    actions = [
        *(_mute_action(minutes, label) for minutes, label in actions.MUTE_CHOICES),
        "unmute",
        "send_test_mail",
    ]

    @admin.action(description="Unmute")
    def unmute(self, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        actions.unmute(list(queryset))
        self.message_user(request, f"Unmuted {queryset.count()} rule(s).")

    @admin.action(description="Send a test mail")
    def send_test_mail(self, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        for rule in queryset:
            notification = actions.send_test(rule)
            if notification.status == NotificationStatus.PENDING:
                self.message_user(
                    request, f"“{rule}”: test mail to {', '.join(notification.recipients)} queued."
                )
            else:
                self.message_user(request, f"“{rule}”: {notification.error}", level=messages.ERROR)


class NotificationInline(admin.TabularInline):
    model = Notification
    fields = ("created_at", "kind", "status", "subject", "attempts", "sent_at", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ("summary", "rule", "opened_at", "clear_since", "resolved_at", "resolved_by")
    list_filter = ("rule", ("resolved_at", admin.EmptyFieldListFilter))
    list_select_related = ("rule",)
    search_fields = ("summary", "stream_id", "label")
    date_hierarchy = "opened_at"
    readonly_fields = [f.name for f in Incident._meta.fields]
    inlines = [NotificationInline]
    actions = ["resolve"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Resolve (sends the resolution mail)")
    def resolve(self, request: HttpRequest, queryset: QuerySet[Incident]) -> None:
        count = actions.resolve(
            list(queryset.filter(resolved_at__isnull=True)), by=request.user.get_username()
        )
        self.message_user(request, f"Resolved {count} incident(s).")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "status", "subject", "attempts", "sent_at", "error")
    list_filter = ("status", "kind", "rule")
    list_select_related = ("rule",)
    search_fields = ("subject",)
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in Notification._meta.fields]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Send failed mails again")
    def send_again(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        ids = list(queryset.filter(status=NotificationStatus.FAILED).values_list("pk", flat=True))
        Notification.objects.filter(pk__in=ids, status=NotificationStatus.FAILED).update(
            status=NotificationStatus.PENDING, attempts=0, next_attempt_at=timezone.now()
        )
        dispatch(ids)
        self.message_user(request, f"{len(ids)} failed mail(s) queued again.")
