"""Maintenance windows and the rules: inside a window a rule opens no incident and sends no mail; an incident
already open stays open; once the window ends the rule speaks again."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import mail as outbox

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import ChannelMessage, Condition, Incident, Notification
from dashboard.expectations.models import MaintenanceWindow
from tests.alerts.factories import OTHER_STREAM, STREAM, failures, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db


def run(now: datetime) -> None:
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)


def window(now: datetime, **fields: Any) -> MaintenanceWindow:
    fields.setdefault("scope", "stream")
    fields.setdefault("scope_value", STREAM)
    fields.setdefault("starts_at", now - timedelta(minutes=30))
    fields.setdefault("ends_at", now + timedelta(minutes=30))
    made = MaintenanceWindow(name="Receiver upgrade", **fields)
    made.full_clean()
    made.save()
    return made


@pytest.mark.parametrize(
    "scope", [{"scope": "stream", "scope_value": STREAM}, {"scope": "tag", "scope_value": "orders"}, {"scope": "all"}]
)
def test_a_window_keeps_a_rule_quiet(scope: dict[str, str]) -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 12)
    window(now, **scope)

    run(now)

    assert not Incident.objects.exists()
    assert not Notification.objects.exists() and not ChannelMessage.objects.exists()
    assert outbox.outbox == []


def test_only_the_targets_it_covers_stay_quiet() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 3)
    failures(source, now, 3, stream_id=OTHER_STREAM, tag="payouts")
    window(now, scope="tag", scope_value="payouts")

    run(now)

    assert list(Incident.objects.values_list("stream_id", flat=True)) == [STREAM]
    assert len(outbox.outbox) == 1


def test_a_rule_speaks_again_once_the_window_ended() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=120)
    failures(source, now, 5)
    window(now, ends_at=now + timedelta(minutes=5))

    run(now)
    assert not Incident.objects.exists()
    run(now + timedelta(minutes=6))
    assert Incident.objects.get().opened_at == now + timedelta(minutes=6)
    assert len(outbox.outbox) == 1


def test_an_open_incident_stays_open_inside_a_window() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=120)
    failures(source, now, 5)
    run(now)
    incident = Incident.objects.get()
    window(now + timedelta(minutes=1))

    run(now + timedelta(minutes=2))

    incident.refresh_from_db()
    assert incident.is_open and incident.last_holding_at == now + timedelta(minutes=2)
    assert len(outbox.outbox) == 1


def test_the_stale_poller_of_a_source_is_quiet_only_inside_a_window_for_everything() -> None:
    now = fixed_now()
    make_source(last_success_at=now - timedelta(hours=1))
    make_rule("Stale", condition=Condition.POLLER_STALE, stale_minutes=10)
    window(now, scope="stream", scope_value=STREAM)
    run(now)
    assert Incident.objects.count() == 1

    Incident.objects.all().delete()
    window(now, scope="all")
    run(now)
    assert not Incident.objects.exists()
