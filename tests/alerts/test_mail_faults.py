"""Faults injected around the SMTP server's answer: a mail the server accepted is never sent again, whatever
fails after its 250 (here the database connection is killed while the server holds its answer back, as a
Postgres restart does); a mail whose sender died before the 250 goes out at the next sweep, not minutes later."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Notification, NotificationStatus
from tests.alerts.factories import failures, make_rule, make_source
from tests.alerts.smtp import Sink, smtp_sink
from tests.checks import server_conninfo

pytestmark = pytest.mark.django_db(transaction=True)


class SlowSink(Sink):
    """Holds its 250 back, and meanwhile runs `during` (the fault)."""

    during: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.during is not None:
            self.during()
        time.sleep(1.5)
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def sink(settings: Any) -> Iterator[SlowSink]:
    with smtp_sink(SlowSink) as running:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", running.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        yield running  # type: ignore[misc]


def opened() -> int:
    now = timezone.now()
    source = make_source()
    make_rule(window_minutes=5, grace_minutes=5)
    failures(source, now, 3)
    ids = evaluate.sweep(now)
    assert len(ids) == 1
    return ids[0]


def killer_of_my_database_connection() -> Any:
    """What a Postgres restart does to this process's connection: the server ends it. Made here, run from the
    SMTP server's thread while it holds its answer back."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    conninfo = server_conninfo()

    def terminate() -> None:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])

    return terminate


def test_an_accepted_mail_is_recorded_and_never_resent_when_the_database_drops_before_its_row_is_written(
    sink: SlowSink,
) -> None:
    notification_id = opened()
    sink.during = killer_of_my_database_connection()
    assert MAIL.send(notification_id) == NotificationStatus.SENT
    assert len(sink.messages) == 1
    assert Notification.objects.get(pk=notification_id).status == NotificationStatus.SENT
    # Every later sweep and task leaves it alone.
    sink.during = None
    later = timezone.now() + timedelta(minutes=20)
    assert notification_id not in MAIL.lost(later)
    MAIL.send(notification_id, later)
    assert len(sink.messages) == 1


def test_a_mail_accepted_by_a_sender_that_died_before_writing_its_row_is_recorded_not_resent(
    sink: SlowSink,
) -> None:
    notification_id = opened()
    MAIL.send(notification_id)
    assert len(sink.messages) == 1 and MAIL.accepted(Notification.objects.get(pk=notification_id))
    # As if the worker died after the 250: the row still says sending, and nobody holds its lease.
    Notification.objects.filter(pk=notification_id).update(
        status=NotificationStatus.SENDING, sent_at=None, claimed_at=timezone.now() - timedelta(minutes=1)
    )
    assert notification_id in MAIL.lost()
    assert MAIL.send(notification_id) == NotificationStatus.SENT
    assert len(sink.messages) == 1
    assert Notification.objects.get(pk=notification_id).status == NotificationStatus.SENT


def test_a_mail_whose_sender_died_before_the_250_goes_out_at_the_next_sweep(sink: SlowSink) -> None:
    notification_id = opened()
    # Claimed a minute ago by a worker that is gone: no lease, no acceptance.
    Notification.objects.filter(pk=notification_id).update(
        status=NotificationStatus.SENDING, claimed_at=timezone.now() - timedelta(minutes=1)
    )
    assert notification_id in MAIL.lost()
    assert MAIL.send(notification_id) == NotificationStatus.SENT
    assert len(sink.messages) == 1


def test_a_mail_being_sent_is_not_taken_for_lost(sink: SlowSink) -> None:
    notification_id = opened()
    seen: list[list[int]] = []
    # While the server holds its answer back, the sweep looks: the live sender's lease keeps the row.
    sink.during = lambda: seen.append(MAIL.lost(timezone.now() + timedelta(minutes=2)))
    MAIL.send(notification_id)
    assert seen == [[]] and len(sink.messages) == 1
