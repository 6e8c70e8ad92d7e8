"""Incidents open and resolve from transitions only; each dedup promise has its own test."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail as outbox

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Incident, Notification, NotificationKind, NotificationStatus
from dashboard.sources.models import Source
from tests.alerts.factories import (
    HOOK,
    REFUSED,
    STREAM,
    failures,
    fixed_now,
    make_rule,
    make_source,
    record,
    store,
    successes,
)

pytestmark = pytest.mark.django_db


def run(now):  # type: ignore[no-untyped-def]
    """One alert worker pass: evaluate, then send what it produced."""
    ids = evaluate.evaluate_all(now)
    for notification_id in ids:
        MAIL.send(notification_id, now)
    return ids


def test_it_opens_an_incident_and_sends_one_mail() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 42)

    run(now)

    incident = Incident.objects.get()
    assert incident.is_open
    assert incident.stream_id == STREAM
    assert incident.summary == "stream orders: 42 failed deliveries to hooks.example.com — connect ECONNREFUSED"
    assert len(outbox.outbox) == 1
    message = outbox.outbox[0]
    assert message.subject == f"[FAILING] {incident.summary}"
    assert message.to == ["ops@example.com", "oncall@example.com"]
    assert message.extra_headers["Message-ID"] == incident.message_id
    assert f"http://localhost:8000/deliveries/?stream={STREAM}&status=failing" in message.body
    assert "42 × connect ECONNREFUSED <ip>" in message.body
    assert Notification.objects.get().status == NotificationStatus.SENT


def test_the_same_failure_polled_again_sends_no_second_mail() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failed = record(now - timedelta(minutes=2), error=REFUSED)
    store(source, failed)
    run(now)

    # The next polls return the same record, unchanged; evaluation runs after each.
    for minutes in (1, 2, 3):
        result = store(source, failed)
        assert result.unchanged == 1
        run(now + timedelta(minutes=minutes))

    assert len(outbox.outbox) == 1
    assert Incident.objects.count() == 1
    assert Notification.objects.count() == 1


def test_a_retried_delivery_sends_no_second_mail() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failed = record(now - timedelta(minutes=5), error=REFUSED)
    store(source, failed)
    run(now)

    # The upstream retries in place: retries go up and the message changes, the record id stays.
    retried = {**failed, "errorMessage": "Request failed with status code 502"}
    retried["tinyPayload"] = {**failed["tinyPayload"], "retries": 1}
    assert store(source, retried).updated == 1
    run(now + timedelta(minutes=1))
    retried["tinyPayload"] = {**failed["tinyPayload"], "retries": 2}
    assert store(source, retried).updated == 1
    run(now + timedelta(minutes=11))

    assert len(outbox.outbox) == 1
    assert Incident.objects.count() == 1


def test_flapping_within_the_grace_period_sends_no_resolve_or_reopen_mail() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(window_minutes=5, grace_minutes=10)
    first = record(now - timedelta(minutes=1), error=REFUSED)
    store(source, first)
    run(now)

    # The retry succeeds: the condition clears...
    store(source, {**first, "errorMessage": "", "tinyPayload": {**first["tinyPayload"], "retries": 1}})
    run(now + timedelta(minutes=2))
    incident = Incident.objects.get()
    assert incident.clear_since == now + timedelta(minutes=2)
    # ...and holds again 6 minutes later, inside the grace period,
    later = now + timedelta(minutes=8)
    store(source, record(later - timedelta(seconds=30), error=REFUSED))
    run(later)
    # ...and clears again.
    store(source, record(later + timedelta(minutes=1)))
    for minutes in (7, 12, 16):
        run(later + timedelta(minutes=minutes))

    assert len(outbox.outbox) == 1
    incident.refresh_from_db()
    assert incident.is_open
    assert Incident.objects.filter(rule=rule).count() == 1


def test_it_resolves_after_the_grace_period_with_a_mail_in_the_same_thread() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=10)
    failures(source, now, 3)
    run(now)

    run(now + timedelta(minutes=6))  # the failures left the window: clear since now
    run(now + timedelta(minutes=15))  # still inside the grace period
    assert Incident.objects.get().is_open
    run(now + timedelta(minutes=16))
    run(now + timedelta(minutes=17))

    incident = Incident.objects.get()
    assert incident.resolved_at == now + timedelta(minutes=16)
    assert [m.subject.split("]")[0] for m in outbox.outbox] == ["[FAILING", "[RESOLVED"]
    opening, resolution = outbox.outbox
    assert resolution.subject == f"[RESOLVED] {incident.summary}"
    assert resolution.extra_headers["In-Reply-To"] == opening.extra_headers["Message-ID"]
    assert resolution.extra_headers["References"] == incident.message_id
    assert resolution.extra_headers["Message-ID"] != incident.message_id
    # The failures left the window but the provider is still retrying them: the resolution says so.
    assert "3 deliveries that failed earlier are still on the provider's retry schedule" in resolution.body
    assert "status=failing" in resolution.body


def test_a_silent_poller_holds_an_incident_open_instead_of_resolving_it() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=10)
    failures(source, now, 3)
    run(now)

    # The poller stops: no new deliveries arrive, so none fail either. That is not a recovery.
    Source.objects.filter(pk=source.pk).update(last_success_at=now)
    run(now + timedelta(minutes=6))
    run(now + timedelta(minutes=30))
    incident = Incident.objects.get()
    assert incident.is_open and incident.clear_since is None
    assert [m.subject.split("]")[0] for m in outbox.outbox] == ["[FAILING"]

    # Polling works again and the stream stays clear: the grace period runs from there.
    for minutes in (45, 55):
        Source.objects.filter(pk=source.pk).update(last_success_at=now + timedelta(minutes=minutes))
        run(now + timedelta(minutes=minutes))
    incident.refresh_from_db()
    assert incident.resolved_at == now + timedelta(minutes=55)
    assert [m.subject.split("]")[0] for m in outbox.outbox] == ["[FAILING", "[RESOLVED"]


def test_a_new_failure_inside_the_cooldown_opens_nothing() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=1, cooldown_minutes=30)
    failures(source, now, 2)
    run(now)
    run(now + timedelta(minutes=6))
    run(now + timedelta(minutes=8))
    assert len(outbox.outbox) == 2

    later = now + timedelta(minutes=20)
    failures(source, later, 1)
    run(later)
    assert len(outbox.outbox) == 2

    # After the cooldown the still-failing stream opens a new incident.
    failures(source, now + timedelta(minutes=40), 1)
    run(now + timedelta(minutes=40))
    assert len(outbox.outbox) == 3
    assert Incident.objects.count() == 2


def test_each_stream_is_its_own_incident() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 2)
    failures(source, now, 3, stream_id="0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", tag="mints")

    run(now)

    assert sorted(m.subject for m in outbox.outbox) == [
        "[FAILING] stream mints: 3 failed deliveries to hooks.example.com — connect ECONNREFUSED",
        "[FAILING] stream orders: 2 failed deliveries to hooks.example.com — connect ECONNREFUSED",
    ]


def test_a_muted_rule_records_the_incident_but_sends_nothing() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(muted_until=now + timedelta(hours=1))
    failures(source, now, 2)

    run(now)

    assert outbox.outbox == []
    notification = Notification.objects.get()
    assert notification.status == NotificationStatus.SKIPPED
    assert "muted" in notification.error
    assert Incident.objects.get().is_open


def test_without_recipients_the_mail_is_recorded_as_not_sent(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ALERT_EMAILS = []
    now = fixed_now()
    source = make_source()
    make_rule(recipients="")
    failures(source, now, 1)

    run(now)

    assert outbox.outbox == []
    assert "ALERT_EMAILS" in Notification.objects.get().error


def test_rule_recipients_default_to_alert_emails(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ALERT_EMAILS = ["team@example.com"]
    now = fixed_now()
    source = make_source()
    make_rule(recipients="")
    failures(source, now, 1)

    run(now)

    assert outbox.outbox[0].to == ["team@example.com"]


def test_a_scoped_rule_ignores_other_streams() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(scope="tag", scope_value="mints")
    failures(source, now, 2)

    run(now)

    assert outbox.outbox == []
    failures(source, now, 1, stream_id="0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", tag="mints")
    run(now)
    assert len(outbox.outbox) == 1


def test_the_poller_going_stale_opens_and_recovering_resolves() -> None:
    now = fixed_now()
    source = make_source(last_success_at=now - timedelta(minutes=11))
    make_rule("Poller stale", condition="poller_stale", stale_minutes=10, grace_minutes=2)

    run(now)
    assert outbox.outbox[0].subject == "[STALE] source upstream: no successful poll for 11 min"

    source.last_success_at = now + timedelta(minutes=1)
    source.save()
    run(now + timedelta(minutes=2))
    run(now + timedelta(minutes=4))
    assert outbox.outbox[1].subject.startswith("[RESOLVED] source upstream")
    # The opening's facts (the old last good poll) are quoted, so the resolution says polling works again.
    assert f"Polling works again: last good poll {now + timedelta(minutes=1):%Y-%m-%d %H:%M:%S} UTC." in (
        outbox.outbox[1].body
    )


def test_a_stale_poller_says_why_in_the_subject() -> None:
    now = fixed_now()
    make_source(
        last_success_at=now - timedelta(minutes=12),
        last_error_kind="rejected_key",
        last_error_message="the upstream rejected the API key: Token is invalid format",
    )
    make_rule("Poller stale", condition="poller_stale", stale_minutes=10)

    run(now)

    (message,) = outbox.outbox
    assert message.subject == (
        "[STALE] source upstream: no successful poll for 12 min — the upstream rejected the API key: Token is invalid format"
    )
    assert "Last poll error: the upstream rejected the API key" in message.body


def test_successes_do_not_alert() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    successes(source, now, 20)

    run(now)

    assert outbox.outbox == []
    assert not Incident.objects.exists()


def test_manual_resolve_sends_the_resolution_once() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 1)
    run(now)
    incident = Incident.objects.get()

    first = evaluate.resolve_incident(incident, now, by="alice")
    second = evaluate.resolve_incident(incident, now, by="bob")

    assert first is not None and second is None
    MAIL.send(first.pk, now)
    assert outbox.outbox[-1].subject.startswith("[RESOLVED]")
    assert "Resolved by alice" in outbox.outbox[-1].body
    assert Notification.objects.filter(kind=NotificationKind.RESOLVED).count() == 1


def test_the_webhook_target_uses_the_stored_url() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(scope="webhook_url", scope_value=HOOK)
    failures(source, now, 1)
    run(now)
    assert Incident.objects.get().webhook_url == HOOK


def test_disabling_a_rule_closes_its_incidents_quietly() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule()
    failures(source, now, 1)
    run(now)
    rule.enabled = False
    rule.save()

    run(now + timedelta(minutes=1))

    incident = Incident.objects.get()
    assert incident.resolved_by == "rule disabled"
    assert len(outbox.outbox) == 1


def test_the_sendalerts_command_runs_one_sweep_and_sends() -> None:
    from io import StringIO

    from django.core.management import call_command

    source = make_source()
    make_rule()
    failures(source, fixed_now(), 1)
    out = StringIO()

    call_command("sendalerts", "--once", stdout=out)

    assert "sent" in out.getvalue()
    assert len(outbox.outbox) == 1
