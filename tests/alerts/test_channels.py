"""Alert channels: one opening and one resolution per incident and channel, sent to real HTTP servers on loopback."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from dashboard import encryption
from dashboard.alerts import channels, evaluate, outbox
from dashboard.alerts.models import (
    Channel,
    ChannelKind,
    ChannelMessage,
    Incident,
    NotificationKind,
    NotificationStatus,
)
from tests.alerts.factories import failures, fixed_now, make_rule, make_source
from tests.alerts.receiver import Receiver, receiver

pytestmark = pytest.mark.django_db

SIGNING_SECRET = "whsec-0123456789abcdef"
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"
GENIE_KEY = "00000000-1111-2222-3333-444444444444"


def make_channel(name: str, kind: str, url: str = "", secret: str = "") -> Channel:
    channel = Channel(name=name, kind=kind)
    channels.store_settings(channel, url=url or None, secret=secret or None)
    channel.save()
    return channel


@pytest.fixture
def server() -> Iterator[Receiver]:
    with receiver() as running:
        yield running


def send_due(now: datetime) -> list[str]:
    """What a worker does with the queued channel messages: send each, swallowing the retry request."""
    outcomes = []
    for delivery_id in channels.CHANNELS.due(now):
        try:
            outcomes.append(channels.CHANNELS.send(delivery_id, now))
        except outbox.TransientSendError:
            outcomes.append("retry")
    return outcomes


def open_and_resolve(now: datetime) -> Incident:
    """Failures open an incident; an hour later the condition is clear past the grace period and it resolves."""
    failures(make_source(), now, 3)
    evaluate.evaluate_all(now)
    send_due(now)
    evaluate.evaluate_all(now + timedelta(minutes=20))
    later = now + timedelta(minutes=40)
    evaluate.evaluate_all(later)
    send_due(later)
    incident = Incident.objects.get()
    assert incident.resolved_at == later
    return incident


def test_every_channel_gets_one_opening_and_one_resolution(server: Receiver) -> None:
    now = fixed_now()
    slack = make_channel("slack stand-in", ChannelKind.SLACK, server.url.replace("http://", "json://") + "/slack")
    hook = make_channel("signed hook", ChannelKind.WEBHOOK, server.url + "/hook", SIGNING_SECRET)
    pager = make_channel("pager", ChannelKind.PAGERDUTY, server.url + "/v2/enqueue", ROUTING_KEY)
    genie = make_channel("genie", ChannelKind.OPSGENIE, server.url + "/v2/alerts", GENIE_KEY)
    rule = make_rule(recipients="")
    rule.channels.set([slack, hook, pager, genie])

    incident = open_and_resolve(now)

    by_path: dict[str, list[bytes]] = {}
    for request in server.accepted():
        by_path.setdefault(request.path, []).append(request.body)
    key = f"stream-dashboard-incident-{incident.pk}"

    slack_messages = [r.json() for r in server.accepted() if r.path == "/slack"]
    assert [m["type"] for m in slack_messages] == ["failure", "success"]
    assert slack_messages[0]["title"].startswith("[FAILING] stream orders: 3 failed deliveries")
    assert slack_messages[1]["title"].startswith("[RESOLVED] stream orders")
    assert f"/alerts/incidents/{incident.pk}/" in slack_messages[0]["message"]

    hooks = [r for r in server.accepted() if r.path == "/hook"]
    assert [r.json()["event"] for r in hooks] == ["incident.opened", "incident.resolved"]
    assert {r.json()["dedup_key"] for r in hooks} == {key}
    assert hooks[1].json()["incident"]["status"] == "resolved"

    pages = [r.json() for r in server.accepted() if r.path == "/v2/enqueue"]
    assert [(p["event_action"], p["dedup_key"], p["routing_key"]) for p in pages] == [
        ("trigger", key, ROUTING_KEY),
        ("resolve", key, ROUTING_KEY),
    ]
    assert pages[0]["payload"]["severity"] == "error"

    genies = [r for r in server.accepted() if r.path.startswith("/v2/alerts")]
    assert [r.path for r in genies] == ["/v2/alerts", f"/v2/alerts/{key}/close?identifierType=alias"]
    assert genies[0].json()["alias"] == key
    assert {r.headers["authorization"] for r in genies} == {f"GenieKey {GENIE_KEY}"}

    assert len(server.requests) == 8
    assert ChannelMessage.objects.filter(status=NotificationStatus.SENT).count() == 8
    # Redelivered tasks and later sweeps find nothing left to send.
    for delivery in ChannelMessage.objects.all():
        assert channels.CHANNELS.send(delivery.pk, now + timedelta(hours=1)) == NotificationStatus.SENT
    assert send_due(now + timedelta(hours=2)) == []
    assert len(server.requests) == 8


def test_the_webhook_is_signed_as_the_readme_says(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("hook", ChannelKind.WEBHOOK, server.url + "/hook", SIGNING_SECRET)])
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)

    (request,) = server.requests
    timestamp = request.headers["x-stream-dashboard-timestamp"]
    expected = hmac.new(SIGNING_SECRET.encode(), f"{timestamp}.".encode() + request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(request.headers["x-stream-dashboard-signature"], f"sha256={expected}")
    assert request.headers["x-stream-dashboard-event"] == "incident.opened"
    assert request.headers["x-stream-dashboard-delivery"] == str(ChannelMessage.objects.get().pk)
    assert request.headers["content-type"] == "application/json"
    # A receiver holding another secret rejects it.
    forged = hmac.new(b"another-secret-0000", f"{timestamp}.".encode() + request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-stream-dashboard-signature"] != f"sha256={forged}"


def test_a_failed_send_is_retried_with_backoff_and_accepted_once(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("slack stand-in", ChannelKind.SLACK, server.url.replace("http://", "json://"))])
    server.answers = [503]
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)

    assert send_due(now) == ["retry"]
    delivery = ChannelMessage.objects.get()
    assert delivery.status == NotificationStatus.PENDING and delivery.attempts == 1
    assert delivery.next_attempt_at == now + timedelta(seconds=30)
    assert "503" in delivery.error
    channel = Channel.objects.get()
    assert channel.last_attempt_ok is False and "503" in channel.last_attempt_result
    # Not due before its backoff: a sweep in between sends nothing.
    assert send_due(now + timedelta(seconds=10)) == []

    later = now + timedelta(minutes=3)  # the retry task's countdown, or the sweep once it is overdue
    assert send_due(later) == [NotificationStatus.SENT]
    assert channels.CHANNELS.send(delivery.pk, later) == NotificationStatus.SENT
    assert [r.headers["x-answered"] for r in server.requests] == ["error", "ok"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.error) == (NotificationStatus.SENT, 2, "")
    channel.refresh_from_db()
    assert channel.last_attempt_ok is True


def test_retries_are_bounded(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("hook", ChannelKind.WEBHOOK, server.url, SIGNING_SECRET)])
    server.answers = [500] * 20
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    at = now
    for _ in range(outbox.MAX_SEND_ATTEMPTS + 2):
        send_due(at)
        at += timedelta(hours=2)
    delivery = ChannelMessage.objects.get()
    assert delivery.status == NotificationStatus.FAILED
    assert delivery.attempts == outbox.MAX_SEND_ATTEMPTS
    assert len(server.requests) == outbox.MAX_SEND_ATTEMPTS


def test_a_refusal_is_not_retried_and_the_resolution_is_skipped(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("pager", ChannelKind.PAGERDUTY, server.url, ROUTING_KEY)])
    server.answers = [400]
    open_and_resolve(now)
    # The opening never reached PagerDuty, so there is nothing to resolve there.
    opening = ChannelMessage.objects.get()
    assert (opening.kind, opening.status, opening.attempts) == (NotificationKind.OPENED, NotificationStatus.FAILED, 1)
    assert len(server.requests) == 1


def test_a_resolution_waits_for_its_opening(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="", grace_minutes=1, window_minutes=5)
    rule.channels.set([make_channel("pager", ChannelKind.PAGERDUTY, server.url, ROUTING_KEY)])
    server.answers = [502]
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)  # the trigger fails and waits for its retry
    incident = Incident.objects.get()
    evaluate.resolve_incident(incident, now + timedelta(seconds=5), by="sam")
    resolution = ChannelMessage.objects.get(kind=NotificationKind.RESOLVED)

    # The resolution must not overtake the trigger: PagerDuty would keep the incident open.
    assert channels.CHANNELS.send(resolution.pk, now + timedelta(seconds=6)) == NotificationStatus.PENDING
    assert len(server.requests) == 1

    later = now + timedelta(seconds=31)  # the trigger's retry
    opening = ChannelMessage.objects.get(kind=NotificationKind.OPENED)
    assert channels.CHANNELS.send(opening.pk, later) == NotificationStatus.SENT
    # The task that sent the opening queues the resolution that waited for it, due at once.
    assert channels.CHANNELS.on_sent(ChannelMessage.objects.get(pk=opening.pk), later) == [resolution.pk]
    assert channels.CHANNELS.send(resolution.pk, later) == NotificationStatus.SENT
    assert [r.json()["event_action"] for r in server.accepted()] == ["trigger", "resolve"]


def test_a_muted_rule_notifies_no_channel(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="", muted_until=now + timedelta(days=1))
    rule.channels.set([make_channel("hook", ChannelKind.WEBHOOK, server.url, SIGNING_SECRET)])
    open_and_resolve(now)
    assert list(ChannelMessage.objects.values_list("kind", "status")) == [
        (NotificationKind.OPENED, NotificationStatus.SKIPPED)
    ]
    assert server.requests == []


def test_a_resolution_goes_to_the_channels_that_heard_the_opening(server: Receiver) -> None:
    now = fixed_now()
    first = make_channel("first", ChannelKind.WEBHOOK, server.url + "/first", SIGNING_SECRET)
    second = make_channel("second", ChannelKind.WEBHOOK, server.url + "/second", SIGNING_SECRET)
    rule = make_rule(recipients="")
    rule.channels.set([first])
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)
    rule.channels.set([second])
    evaluate.resolve_incident(Incident.objects.get(), now + timedelta(minutes=1), by="sam")
    send_due(now + timedelta(minutes=1))
    assert [(r.path, r.json()["event"]) for r in server.requests] == [
        ("/first", "incident.opened"),
        ("/first", "incident.resolved"),
    ]


def test_a_disabled_rule_still_closes_its_pager_incidents(server: Receiver) -> None:
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([
        make_channel("pager", ChannelKind.PAGERDUTY, server.url, ROUTING_KEY),
        make_channel("hook", ChannelKind.WEBHOOK, server.url + "/hook", SIGNING_SECRET),
    ])
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)
    rule.enabled = False
    rule.save()
    evaluate.evaluate_all(now + timedelta(minutes=1))
    send_due(now + timedelta(minutes=1))
    # The webhook hears nothing more; PagerDuty is told to resolve what it was told to trigger.
    assert [r.json().get("event_action") or r.json()["event"] for r in server.requests] == [
        "incident.opened",
        "trigger",
        "resolve",
    ]


def test_errors_never_carry_the_channel_secret(server: Receiver) -> None:
    now = fixed_now()
    token = "T0KENabcdef123456"
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("hook", ChannelKind.SLACK, f"json://127.0.0.1:1/{token}/path")])
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)
    delivery = ChannelMessage.objects.get()
    assert delivery.status == NotificationStatus.PENDING and delivery.error
    assert token not in delivery.error
    assert token not in Channel.objects.get().last_attempt_result


def test_urls_and_secrets_are_stored_encrypted(server: Receiver) -> None:
    channel = make_channel("hook", ChannelKind.WEBHOOK, server.url + "/secret-path", SIGNING_SECRET)
    row = Channel.objects.values("url_encrypted", "secret_encrypted", "url_hint").get(pk=channel.pk)
    assert "secret-path" not in row["url_encrypted"] and SIGNING_SECRET not in row["secret_encrypted"]
    assert encryption.decrypt(row["secret_encrypted"]) == SIGNING_SECRET
    assert row["url_hint"] == "http://127.0.0.1"
    assert channels.url_hint(ChannelKind.SLACK, "slack://TokenA/TokenB/TokenC") == "Slack (slack://…)"


def test_a_rotated_key_still_reads_old_secrets(settings) -> None:  # type: ignore[no-untyped-def]
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = [old]
    token = encryption.encrypt("hunter2-hunter2")
    settings.ENCRYPTION_KEYS = [new, old]
    assert encryption.decrypt(token) == "hunter2-hunter2"
    settings.ENCRYPTION_KEYS = [new]
    with pytest.raises(encryption.UnreadableSecret):
        encryption.decrypt(token)


def test_without_keys_secrets_are_encrypted_under_a_key_derived_from_secret_key(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ENCRYPTION_KEYS = []
    token = encryption.encrypt("hunter2-hunter2")
    assert "hunter2" not in token and encryption.decrypt(token) == "hunter2-hunter2"
    settings.SECRET_KEY = "another-secret-key-entirely"
    with pytest.raises(encryption.UnreadableSecret):
        encryption.decrypt(token)


def test_settings_are_checked_per_kind() -> None:
    assert channels.check_settings(ChannelKind.SLACK, "https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXX", "") == {}
    assert "new_url" in channels.check_settings(ChannelKind.SLACK, "not a url", "")
    assert "new_secret" in channels.check_settings(ChannelKind.WEBHOOK, "https://example.com/h", "short")
    assert channels.check_settings(ChannelKind.PAGERDUTY, "", ROUTING_KEY) == {}
    assert "new_secret" in channels.check_settings(ChannelKind.OPSGENIE, "", "")


def test_the_incident_page_lists_the_channel_messages(server: Receiver, logged_in_client) -> None:  # type: ignore[no-untyped-def]
    now = fixed_now()
    rule = make_rule(recipients="")
    rule.channels.set([make_channel("ops <b>hook</b>", ChannelKind.WEBHOOK, server.url + "/tok3n", SIGNING_SECRET)])
    server.answers = [503]
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    send_due(now)
    page = logged_in_client.get(f"/alerts/incidents/{Incident.objects.get().pk}/").content.decode()
    assert "ops &lt;b&gt;hook&lt;/b&gt;" in page
    assert "HTTP 503" in page
    assert "tok3n" not in page and SIGNING_SECRET not in page
