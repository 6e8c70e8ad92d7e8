"""What people do to alerts from the admin or the alerts page: mute, resolve, send a test mail or message."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from dashboard.alerts import channels, evaluate, mail
from dashboard.alerts.models import (
    AlertRule,
    Channel,
    ChannelDelivery,
    Incident,
    Notification,
    NotificationStatus,
)
from dashboard.alerts.tasks import dispatch, dispatch_channel_deliveries, dispatch_due_channel_deliveries

MUTE_CHOICES = [(60, "1 hour"), (240, "4 hours"), (1440, "24 hours"), (10080, "7 days")]


def mute(rules: list[AlertRule], minutes: int, now: datetime | None = None) -> datetime:
    until = (now or timezone.now()) + timedelta(minutes=minutes)
    AlertRule.objects.filter(pk__in=[r.pk for r in rules]).update(muted_until=until)
    return until


def unmute(rules: list[AlertRule]) -> None:
    AlertRule.objects.filter(pk__in=[r.pk for r in rules]).update(muted_until=None)


def resolve(incidents: list[Incident], by: str, now: datetime | None = None) -> int:
    """Resolve by hand; each resolution mail is written once and sent after commit."""
    now = now or timezone.now()
    resolved = 0
    with transaction.atomic():
        for incident in incidents:
            notification = evaluate.resolve_incident(incident, now, by=by)
            if notification is None:
                continue
            resolved += 1
            if notification.status == NotificationStatus.PENDING:
                dispatch([notification.pk])
        dispatch_due_channel_deliveries()
    return resolved


def send_test(rule: AlertRule, now: datetime | None = None) -> Notification:
    with transaction.atomic():
        notification = mail.create_test(rule, now or timezone.now())
        if notification.status == NotificationStatus.PENDING:
            dispatch([notification.pk])
    return notification


def send_channel_test(channel: Channel, now: datetime | None = None) -> ChannelDelivery:
    with transaction.atomic():
        delivery = channels.create_test(channel, now or timezone.now())
        dispatch_channel_deliveries([delivery.pk])
    return delivery
