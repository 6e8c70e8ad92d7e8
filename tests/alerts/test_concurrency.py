"""Alert workers running at the same moment against real Postgres, each thread on its own connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.core import mail as outbox
from django.db import connection

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Incident, Notification, NotificationStatus
from dashboard.alerts.outbox import TransientSendError
from tests.alerts.factories import failures, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 4


def at_once(work: Callable[[], None]) -> list[BaseException]:
    """Run `work` in WORKERS threads released together; returns what they raised."""
    barrier = threading.Barrier(WORKERS)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=10)
            work()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def test_workers_evaluating_and_sending_at_once_send_one_mail() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 5)

    def alert_worker() -> None:
        for notification_id in evaluate.sweep(now):
            MAIL.send(notification_id, now)
        # A duplicate task for every row (a redelivered message) must find nothing left to send.
        for notification_id in Notification.objects.values_list("pk", flat=True):
            MAIL.send(notification_id, now)

    assert at_once(alert_worker) == []

    assert Incident.objects.count() == 1
    assert Notification.objects.get().status == NotificationStatus.SENT
    assert len(outbox.outbox) == 1


def test_workers_resolving_at_once_send_one_resolution() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=1)
    failures(source, now, 2)
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    evaluate.evaluate_all(now + timedelta(minutes=6))  # clear since

    def alert_worker() -> None:
        later = now + timedelta(minutes=8)
        for notification_id in evaluate.sweep(later):
            MAIL.send(notification_id, later)

    assert at_once(alert_worker) == []

    assert [m.subject[:10] for m in outbox.outbox] == ["[FAILING] ", "[RESOLVED]"]


def test_the_cap_is_exact_under_concurrency(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ALERT_MAX_MAILS_PER_HOUR = 3
    now = fixed_now()
    source = make_source()
    make_rule()
    for i in range(8):
        failures(source, now, 1, stream_id=f"00000000-0000-4000-8000-00000000000{i}", tag=f"t{i}")
    ids = evaluate.evaluate_all(now)
    assert len(ids) == 8

    def sender() -> None:
        for notification_id in ids:
            MAIL.send(notification_id, now)

    assert at_once(sender) == []

    assert len(outbox.outbox) == 3
    assert Notification.objects.filter(status=NotificationStatus.HELD).count() == 5


def test_workers_at_once_send_one_opening_and_one_resolution_per_channel() -> None:
    from dashboard.alerts import channels
    from dashboard.alerts.models import Channel, ChannelKind, ChannelMessage
    from tests.alerts.receiver import receiver

    now = fixed_now()
    source = make_source()
    rule = make_rule(recipients="", window_minutes=5, grace_minutes=1)
    with receiver() as server:
        hook = Channel(name="hook", kind=ChannelKind.WEBHOOK)
        channels.store_settings(hook, url=server.url + "/hook", secret="whsec-0123456789abcdef")
        slack = Channel(name="slack stand-in", kind=ChannelKind.SLACK)
        channels.store_settings(slack, url=server.url.replace("http://", "json://") + "/slack", secret=None)
        hook.save()
        slack.save()
        rule.channels.set([hook, slack])
        # The first attempt to the webhook fails: the retry must still deliver it exactly once.
        server.answers = [500]
        failures(source, now, 2)

        def worker_at(at: datetime) -> Callable[[], None]:
            def work() -> None:
                evaluate.sweep(at)
                for delivery_id in channels.CHANNELS.due(at):
                    try:
                        channels.CHANNELS.send(delivery_id, at)
                    except TransientSendError:
                        pass
                # A redelivered task for every row finds nothing left to send.
                for delivery_id in ChannelMessage.objects.values_list("pk", flat=True):
                    try:
                        channels.CHANNELS.send(delivery_id, at)
                    except TransientSendError:
                        pass

            return work

        assert at_once(worker_at(now)) == []
        assert at_once(worker_at(now + timedelta(minutes=3))) == []  # the webhook's retry is due
        assert at_once(worker_at(now + timedelta(minutes=6))) == []  # clear since
        assert at_once(worker_at(now + timedelta(minutes=8))) == []  # resolved
        assert at_once(worker_at(now + timedelta(minutes=12))) == []

        accepted = sorted((r.path, r.json().get("event") or r.json()["type"]) for r in server.accepted())
        assert accepted == [
            ("/hook", "incident.opened"),
            ("/hook", "incident.resolved"),
            ("/slack", "failure"),
            ("/slack", "success"),
        ]
        assert len(server.requests) == 5  # the four above and the webhook's failed first attempt
    assert Incident.objects.get().resolved_at is not None
