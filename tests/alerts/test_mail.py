"""Sending: over real SMTP, threaded, escaped; capped per hour into the digest; failures recorded and retried."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail as outbox

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Incident, Notification, NotificationKind, NotificationStatus
from dashboard.alerts.outbox import MAX_SEND_ATTEMPTS, TransientSendError
from dashboard.alerts.tasks import send_message_task
from tests.alerts.factories import STREAM, failures, fixed_now, make_rule, make_source, record, store
from tests.alerts.smtp import Sink, free_port, smtp_sink

pytestmark = pytest.mark.django_db

HOSTILE = 'Request failed with status code 500 <script>alert("x")</script> & <b>bold</b>'


@pytest.fixture
def sink(settings: Any) -> Iterator[Sink]:
    with smtp_sink() as running:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST = "127.0.0.1"
        settings.EMAIL_PORT = running.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        settings.DEFAULT_FROM_EMAIL = "Stream Dashboard <alerts@dashboard.example>"
        settings.SITE_URL = "https://dash.example.com"
        yield running


def run(now):  # type: ignore[no-untyped-def]
    sent = []
    for notification_id in evaluate.sweep(now):
        sent.append(MAIL.send(notification_id, now))
    return sent


def parts(message: Any) -> tuple[str, str]:
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    return text, html


def test_it_sends_opening_and_resolution_over_smtp_in_one_thread(sink: Sink) -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=5)
    failures(source, now, 3, error=HOSTILE)

    run(now)
    run(now + timedelta(minutes=6))
    run(now + timedelta(minutes=12))

    assert len(sink.messages) == 2
    opening, resolution = sink.messages
    incident = Incident.objects.get()
    assert opening["Subject"] == f"[FAILING] stream orders: 3 failed deliveries to hooks.example.com — {HOSTILE}"
    assert opening["From"] == "Stream Dashboard <alerts@dashboard.example>"
    assert sink.envelopes[0] == ("alerts@dashboard.example", ["ops@example.com", "oncall@example.com"])
    assert opening["Message-ID"] == incident.message_id
    assert opening["Message-ID"].endswith("@dash.example.com>")
    assert resolution["Subject"] == f"[RESOLVED] {incident.summary}"
    assert resolution["In-Reply-To"] == opening["Message-ID"]
    assert resolution["References"] == opening["Message-ID"]
    assert resolution["Message-ID"] != opening["Message-ID"]

    text, html = parts(opening)
    failed_link = f"https://dash.example.com/deliveries/?stream={STREAM}&status=failing"
    assert failed_link in text
    assert f'href="{failed_link.replace("&", "&amp;")}"' in html
    group_id = incident.details["error_groups"][0]["id"]
    assert f"https://dash.example.com/deliveries/?stream={STREAM}&status=failing&group={group_id}" in text
    assert f"https://dash.example.com/alerts/incidents/{incident.pk}/" in text
    # Untrusted upstream text: verbatim in the text part, escaped in the HTML part.
    assert HOSTILE in text
    assert "<script>" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "3 ×" in text
    assert len(re.findall(r"retrying, 0 retries, block 1900000\d: Request failed with status code 500 <script>", text)) == 3


def test_the_cap_holds_mails_back_into_the_next_digest(settings: Any) -> None:
    settings.ALERT_MAX_MAILS_PER_HOUR = 2
    now = fixed_now()
    source = make_source()
    rule = make_rule(grace_minutes=120)
    streams = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(4)]
    for i, stream_id in enumerate(streams):
        failures(source, now, 1, stream_id=stream_id, tag=f"tag{i}")

    outcomes = run(now)

    assert sorted(outcomes) == ["held", "held", "sent", "sent"]
    assert len(outbox.outbox) == 2
    held = Notification.objects.filter(status=NotificationStatus.HELD)
    assert held.count() == 2
    assert "2 alert mails sent in the last hour" in held.first().error  # type: ignore[union-attr]

    # Within the hour nothing more goes out; an hour after the first was held, the digest carries them.
    run(now + timedelta(minutes=30))
    assert len(outbox.outbox) == 2
    run(now + timedelta(minutes=61))

    assert len(outbox.outbox) == 3
    digest = outbox.outbox[2]
    assert digest.subject == f"[DIGEST] {rule.name}: 4 still failing, 2 held back"
    for notification in held.model.objects.filter(kind=NotificationKind.OPENED, status=NotificationStatus.DIGESTED):
        assert notification.subject in digest.body
    assert Notification.objects.filter(status=NotificationStatus.DIGESTED).count() == 2
    # Nothing is held twice: the next sweep sends no second digest.
    run(now + timedelta(minutes=62))
    assert len(outbox.outbox) == 3


def test_a_resolution_of_a_held_back_opening_is_not_sent(settings: Any) -> None:
    settings.ALERT_MAX_MAILS_PER_HOUR = 1
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=1)
    failures(source, now, 1)
    failures(source, now, 1, stream_id="00000000-0000-4000-8000-000000000009", tag="other")
    run(now)
    (held,) = Notification.objects.filter(status=NotificationStatus.HELD)
    settings.ALERT_MAX_MAILS_PER_HOUR = 10
    run(now + timedelta(minutes=6))
    run(now + timedelta(minutes=8))

    assert [m.subject[:10] for m in outbox.outbox] == ["[FAILING] ", "[RESOLVED]"]
    resolution = Notification.objects.get(incident=held.incident, kind=NotificationKind.RESOLVED)
    assert resolution.status == NotificationStatus.SKIPPED
    assert resolution.error == "the opening mail was not sent"


def test_an_hourly_digest_lists_only_what_is_still_failing() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(digest="hourly", window_minutes=5, grace_minutes=1)
    rule.created_at = now - timedelta(minutes=50)
    rule.save()
    failures(source, now, 1)
    failures(source, now - timedelta(minutes=30), 1, stream_id="00000000-0000-4000-8000-000000000009", tag="old")
    run(now)
    assert len(outbox.outbox) == 1  # the old failure is outside the window

    store(source, record(now + timedelta(minutes=9), error="socket hang up"))
    run(now + timedelta(minutes=10))

    digest = outbox.outbox[-1]
    assert digest.subject == f"[DIGEST] {rule.name}: 1 still failing"
    assert "stream orders" in digest.body and "stream old" not in digest.body


def test_a_failed_send_is_recorded_and_retried_with_backoff(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens there
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 1)
    (notification_id,) = evaluate.evaluate_all(now)

    with pytest.raises(TransientSendError):
        MAIL.send(notification_id, now)

    notification = Notification.objects.get(pk=notification_id)
    assert notification.status == NotificationStatus.PENDING
    assert notification.attempts == 1
    assert "Connection refused" in notification.error or "ConnectionRefused" in notification.error
    assert notification.next_attempt_at == now + timedelta(seconds=30)
    # The sweep does not resend it before its backoff has passed (plus the lost-task margin).
    assert notification_id not in MAIL.lost(now + timedelta(minutes=1))
    assert notification_id in MAIL.lost(now + timedelta(minutes=3))


def test_retries_wait_out_their_backoff_until_the_attempts_are_used_up(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 1)
    (notification_id,) = evaluate.evaluate_all(now)

    # Celery runs an eager task's retry at once: the row is still in its backoff, so that run sends nothing.
    send_message_task.apply(args=["mail", notification_id])
    notification = Notification.objects.get(pk=notification_id)
    assert (notification.status, notification.attempts) == (NotificationStatus.PENDING, 1)

    at = now
    for _ in range(MAX_SEND_ATTEMPTS + 2):
        at += timedelta(hours=2)
        try:
            MAIL.send(notification_id, at)
        except TransientSendError:
            pass
    notification = Notification.objects.get(pk=notification_id)
    assert notification.status == NotificationStatus.FAILED
    assert notification.attempts == MAX_SEND_ATTEMPTS
    assert notification.error


def test_a_refused_recipient_fails_at_once_and_is_recorded(sink: Sink) -> None:
    sink.refuse_recipients = True
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 1)
    (notification_id,) = evaluate.evaluate_all(now)

    assert MAIL.send(notification_id, now) == NotificationStatus.FAILED

    notification = Notification.objects.get(pk=notification_id)
    assert notification.attempts == 1
    assert "SMTPRecipientsRefused" in notification.error
    assert sink.messages == []


def test_a_sent_mail_is_never_sent_again() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 1)
    (notification_id,) = evaluate.evaluate_all(now)

    assert MAIL.send(notification_id, now) == "sent"
    assert MAIL.send(notification_id, now) == "sent"
    send_message_task.apply(args=["mail", notification_id])

    assert len(outbox.outbox) == 1


def test_a_held_back_opening_reaches_the_digest_with_its_facts_and_the_resolution_replies_to_it(
    sink: Sink, settings: Any
) -> None:
    settings.ALERT_MAX_MAILS_PER_HOUR = 1
    now = fixed_now()
    source = make_source()
    rule = make_rule(window_minutes=5, grace_minutes=1, cooldown_minutes=0)
    failures(source, now, 3, error=HOSTILE)
    failures(source, now, 3, stream_id="00000000-0000-4000-8000-000000000009", tag="other", error=HOSTILE)
    run(now)
    (held,) = Notification.objects.filter(status=NotificationStatus.HELD)
    incident = held.incident
    assert incident is not None
    sent_label = "other" if incident.label == "orders" else "orders"

    run(now + timedelta(minutes=61))

    digest = sink.messages[-1]
    assert digest["Subject"] == f"[DIGEST] {rule.name}: 2 still failing, 1 held back"
    text, html = parts(digest)
    # The held mail is the reader's only news of that incident: its error groups and links come with it.
    assert held.subject in text
    assert "3 × Request failed with status code 500" in text
    assert f"https://dash.example.com/deliveries/?stream={incident.stream_id}&status=failing" in text
    assert f"https://dash.example.com/alerts/incidents/{incident.pk}/" in text
    assert "<script>" not in html
    # Listed once: under the held mail, not again under "still failing".
    assert text.count(f"stream {incident.label}:") == 1
    assert "Also still failing:" in text and text.count(f"stream {sent_label}:") == 1

    settings.ALERT_MAX_MAILS_PER_HOUR = 10
    run(now + timedelta(minutes=62))
    run(now + timedelta(minutes=64))

    (resolution,) = [m for m in sink.messages if m["Subject"] == f"[RESOLVED] {incident.summary}"]
    assert resolution["In-Reply-To"] == digest["Message-ID"]
    assert resolution["References"] == digest["Message-ID"]
