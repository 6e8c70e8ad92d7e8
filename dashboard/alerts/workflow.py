"""What people do to alerts from the admin or the alerts pages: mute, resolve, send a test mail or message,
and work an incident (acknowledge, assign, note, snooze), each step written to its timeline."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from dashboard.alerts import channels, evaluate, mail
from dashboard.alerts.models import (
    AlertRule,
    Channel,
    ChannelMessage,
    Incident,
    IncidentEvent,
    IncidentEventKind,
    Notification,
)
from dashboard.alerts.tasks import dispatch_due
from dashboard.times import iso_minutes

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
            if evaluate.resolve_incident(incident, now, by=by) is not None:
                resolved += 1
        dispatch_due()
    return resolved


def send_test(rule: AlertRule, now: datetime | None = None) -> Notification:
    with transaction.atomic():
        notification = mail.create_test(rule, now or timezone.now())
        dispatch_due()
    return notification


def send_channel_test(channel: Channel, now: datetime | None = None) -> ChannelMessage:
    with transaction.atomic():
        delivery = channels.create_test(channel, now or timezone.now())
        dispatch_due()
    return delivery


def _event(incident: Incident, kind: str, actor: str, now: datetime, text: str = "") -> IncidentEvent:
    return IncidentEvent.objects.create(incident=incident, kind=kind, actor=actor[:150], text=text, created_at=now)


def acknowledge(incident: Incident, by: str, now: datetime | None = None) -> bool:
    """Say someone is on it; the first acknowledgement of an open incident counts, a repeat changes nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        if not Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True, acknowledged_at__isnull=True).update(
            acknowledged_at=now, acknowledged_by=by[:150]
        ):
            return False
        _event(incident, IncidentEventKind.ACKNOWLEDGED, by, now)
    return True


def assign(incident: Incident, assignee: AbstractBaseUser | None, by: str, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    with transaction.atomic():
        current = Incident.objects.select_for_update().filter(pk=incident.pk).values_list("assignee", flat=True).first()
        if current == (assignee.pk if assignee is not None else None):
            return False
        Incident.objects.filter(pk=incident.pk).update(assignee=assignee)
        _event(
            incident,
            IncidentEventKind.ASSIGNED,
            by,
            now,
            f"to {assignee.get_username()}" if assignee is not None else "unassigned",
        )
    return True


def add_note(incident: Incident, text: str, by: str, now: datetime | None = None) -> IncidentEvent:
    return _event(incident, IncidentEventKind.NOTE, by, now or timezone.now(), text)


def snooze(incident: Incident, minutes: int, by: str, now: datetime | None = None) -> datetime | None:
    """Leave an open incident out of digests for a while; None if it is resolved."""
    now = now or timezone.now()
    until = now + timedelta(minutes=minutes)
    with transaction.atomic():
        if not Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True).update(snoozed_until=until):
            return None
        _event(incident, IncidentEventKind.SNOOZED, by, now, f"until {iso_minutes(until)}")
    return until


def unsnooze(incident: Incident, by: str, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    with transaction.atomic():
        if not Incident.objects.filter(pk=incident.pk, snoozed_until__gt=now).update(snoozed_until=None):
            return False
        _event(incident, IncidentEventKind.UNSNOOZED, by, now)
    return True
