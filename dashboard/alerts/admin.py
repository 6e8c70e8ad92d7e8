from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from dashboard.alerts import workflow
from dashboard.alerts.forms import AlertRuleForm, ChannelForm
from dashboard.alerts.models import (
    AlertRule,
    Channel,
    ChannelMessage,
    Incident,
    IncidentEvent,
    Notification,
    NotificationStatus,
)
from dashboard.alerts.tasks import dispatch_due
from dashboard.text import visible
from dashboard.times import iso_minutes


def _mute_action(minutes: int, label: str) -> Callable[..., None]:
    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        until = workflow.mute(list(queryset), minutes)
        modeladmin.message_user(
            request, f"Muted {queryset.count()} rule(s) until {iso_minutes(until)}."
        )

    action.__name__ = f"mute_{minutes}"
    return admin.action(description=f"Mute for {label}")(action)


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    form = AlertRuleForm
    list_display = ("shown_name", "enabled", "condition", "scope", "scope_value", "digest", "muted_until")
    list_filter = ("enabled", "condition", "scope")
    search_fields = ("name",)
    filter_horizontal = ("channels",)
    fieldsets = (
        (None, {"fields": ("name", "enabled", "recipients", "channels", "digest", "muted_until")}),
        ("Scope", {"fields": ("scope", "scope_value")}),
        (
            "Condition",
            {
                "fields": (
                    "condition",
                    "window_minutes",
                    "threshold_percent",
                    "min_deliveries",
                    "latency_seconds",
                    "quiet_probability",
                    "consecutive_failures",
                    "stale_minutes",
                )
            },
        ),
        ("Timing", {"fields": ("grace_minutes", "cooldown_minutes")}),
    )
    actions = [
        *(_mute_action(minutes, label) for minutes, label in workflow.MUTE_CHOICES),
        "unmute",
        "send_test_mail",
    ]

    @admin.display(description="name", ordering="name")
    def shown_name(self, rule: AlertRule) -> str:
        return visible(rule.name)

    @admin.action(description="Unmute")
    def unmute(self, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        workflow.unmute(list(queryset))
        self.message_user(request, f"Unmuted {queryset.count()} rule(s).")

    @admin.action(description="Send a test mail")
    def send_test_mail(self, request: HttpRequest, queryset: QuerySet[AlertRule]) -> None:
        for rule in queryset:
            notification = workflow.send_test(rule)
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


class ChannelMessageInline(admin.TabularInline):
    model = ChannelMessage
    fields = ("created_at", "channel", "kind", "status", "attempts", "sent_at", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class IncidentEventInline(admin.TabularInline):
    model = IncidentEvent
    verbose_name_plural = "Timeline (acknowledge, assign, add notes and snooze on the incident's page: View on site)"
    fields = ("created_at", "kind", "shown_actor", "shown_text")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # A note is typed by a user: shown like everywhere else, its invisible characters made visible.
    @admin.display(description="text")
    def shown_text(self, event: IncidentEvent) -> str:
        return visible(event.text)

    @admin.display(description="actor")
    def shown_actor(self, event: IncidentEvent) -> str:
        return visible(event.actor)


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = (
        "shown_summary", "rule", "opened_at", "acknowledged_by", "assignee", "snoozed_until", "resolved_at", "resolved_by"
    )
    list_filter = (
        "rule",
        ("resolved_at", admin.EmptyFieldListFilter),
        ("acknowledged_at", admin.EmptyFieldListFilter),
        "assignee",
    )
    list_select_related = ("rule", "assignee")
    search_fields = ("summary", "stream_id", "label")
    date_hierarchy = "opened_at"
    readonly_fields = [f.name for f in Incident._meta.fields]
    inlines = [IncidentEventInline, NotificationInline, ChannelMessageInline]
    actions = ["acknowledge", "resolve"]

    @admin.display(description="summary", ordering="summary")
    def shown_summary(self, incident: Incident) -> str:
        return visible(incident.summary)

    @admin.action(description="Acknowledge (digests stop listing them)")
    def acknowledge(self, request: HttpRequest, queryset: QuerySet[Incident]) -> None:
        by = request.user.get_username()
        count = sum(workflow.acknowledge(incident, by=by) for incident in queryset.filter(resolved_at__isnull=True))
        self.message_user(request, f"Acknowledged {count} incident(s).")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Resolve (sends the resolution mail)")
    def resolve(self, request: HttpRequest, queryset: QuerySet[Incident]) -> None:
        count = workflow.resolve(
            list(queryset.filter(resolved_at__isnull=True)), by=request.user.get_username()
        )
        self.message_user(request, f"Resolved {count} incident(s).")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "status", "shown_subject", "attempts", "sent_at", "error")
    list_filter = ("status", "kind", "rule")
    list_select_related = ("rule",)
    search_fields = ("subject",)
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in Notification._meta.fields]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="subject", ordering="subject")
    def shown_subject(self, notification: Notification) -> str:
        return visible(notification.subject)

    @admin.action(description="Send failed mails again")
    def send_again(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        ids = list(queryset.filter(status=NotificationStatus.FAILED).values_list("pk", flat=True))
        Notification.objects.filter(pk__in=ids, status=NotificationStatus.FAILED).update(
            status=NotificationStatus.PENDING, attempts=0, next_attempt_at=timezone.now()
        )
        dispatch_due()
        self.message_user(request, f"{len(ids)} failed mail(s) queued again.")


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = (
        "shown_name", "kind", "enabled", "team", "url_hint", "last_attempt_at", "last_attempt_ok", "last_attempt_result"
    )
    list_filter = ("kind", "enabled")
    search_fields = ("name",)
    readonly_fields = ("url_hint", "last_attempt_at", "last_attempt_ok", "last_attempt_result", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "kind", "enabled", "team", "new_url", "url_hint", "new_secret")}),
        ("Last delivery", {"fields": ("last_attempt_at", "last_attempt_ok", "last_attempt_result")}),
    )
    actions = ["send_test"]

    @admin.display(description="name", ordering="name")
    def shown_name(self, channel: Channel) -> str:
        return visible(channel.name)

    @admin.action(description="Send a test message")
    def send_test(self, request: HttpRequest, queryset: QuerySet[Channel]) -> None:
        for channel in queryset[:20]:
            workflow.send_channel_test(channel)
            self.message_user(
                request,
                f"“{channel}”: test message queued; its result shows under Last delivery in a few seconds.",
            )


@admin.register(ChannelMessage)
class ChannelMessageAdmin(admin.ModelAdmin):
    list_display = ("created_at", "channel", "kind", "status", "incident", "attempts", "sent_at", "error")
    list_filter = ("status", "kind", "channel")
    list_select_related = ("channel", "incident")
    date_hierarchy = "created_at"
    exclude = ("payload",)
    # The payload is shown by `shown_payload`, in its place: Django's own display of a JSON field prints its
    # strings raw, rule and channel names typed by users among them.
    readonly_fields = [
        "shown_payload" if f.name == "payload" else f.name for f in ChannelMessage._meta.fields
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="payload")
    def shown_payload(self, delivery: ChannelMessage) -> str:
        # The whole text made visible, whatever fields the payload has; the stored payload stays as sent.
        return visible(json.dumps(delivery.payload, ensure_ascii=False, indent=2, sort_keys=True))
