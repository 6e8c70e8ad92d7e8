"""From the upstream to the inbox: a poll that stores new failures triggers evaluation and the mails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail as outbox

from dashboard.alerts.models import Incident
from dashboard.celery import app
from dashboard.deliveries.models import Delivery
from dashboard.polling.tasks import poll_source_task
from tests.alerts.factories import make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """Tasks queued by the poll run in place, so the whole chain is observable in one test."""
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = False


def test_a_poll_with_new_failures_sends_one_mail_per_failing_stream(
    simulator: Any, source: Any, eager_celery: None, django_capture_on_commit_callbacks: Any
) -> None:
    make_rule(window_minutes=8 * 24 * 60)  # every failure the simulator's history holds

    with django_capture_on_commit_callbacks(execute=True):
        result = poll_source_task.apply(args=[source.id]).get()
    assert result.stored.new_failures > 0

    failing_streams = set(Delivery.objects.failures().values_list("stream_id", flat=True))
    assert set(Incident.objects.values_list("stream_id", flat=True)) == failing_streams
    assert len(outbox.outbox) == len(failing_streams)
    assert all(m.subject.startswith("[FAILING] stream ") for m in outbox.outbox)

    # The upstream has not changed: the next poll stores nothing new and sends nothing.
    with django_capture_on_commit_callbacks(execute=True):
        poll_source_task.apply(args=[source.id])
    assert len(outbox.outbox) == len(failing_streams)


def test_a_poll_with_new_failures_notifies_each_channel_once(
    simulator: Any, source: Any, eager_celery: None, django_capture_on_commit_callbacks: Any
) -> None:
    from dashboard.alerts import channels
    from dashboard.alerts.models import Channel, ChannelKind
    from tests.alerts.receiver import receiver

    rule = make_rule(window_minutes=8 * 24 * 60, recipients="")
    with receiver() as server:
        hook = Channel(name="hook", kind=ChannelKind.WEBHOOK)
        channels.store_settings(hook, url=server.url + "/hook", secret="whsec-0123456789abcdef")
        hook.save()
        rule.channels.set([hook])

        with django_capture_on_commit_callbacks(execute=True):
            poll_source_task.apply(args=[source.id])
        incidents = set(Incident.objects.values_list("pk", flat=True))
        assert incidents
        assert sorted(r.json()["incident"]["id"] for r in server.requests) == sorted(incidents)
        assert {r.json()["event"] for r in server.requests} == {"incident.opened"}

        with django_capture_on_commit_callbacks(execute=True):
            poll_source_task.apply(args=[source.id])
        assert len(server.requests) == len(incidents)
