"""A rule on the provider's own stream status: its messages state the status, not a failure count."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard.alerts import evaluate, workflow
from dashboard.alerts.models import (
    Channel,
    ChannelKind,
    ChannelMessage,
    Incident,
    Notification,
    NotificationKind,
)
from dashboard.deliveries.models import Stream
from tests.alerts.factories import STREAM, fixed_now, make_rule, make_source, record, store

pytestmark = pytest.mark.django_db


def test_it_states_the_provider_status_in_the_opening_and_resolution() -> None:
    now = fixed_now()
    store(make_source(), record(now - timedelta(hours=2)))
    since = now - timedelta(minutes=30)
    Stream.objects.filter(stream_id=STREAM).update(
        provider_status="terminated", provider_status_since=since, provider_status_message="Too many errors"
    )
    rule = make_rule("Stream down at the provider", condition="provider_error_state")
    rule.channels.add(Channel.objects.create(name="ops", kind=ChannelKind.SLACK))
    evaluate.evaluate_all(now)
    incident = Incident.objects.get()
    workflow.resolve([incident], by="olga", now=now + timedelta(minutes=5))

    stated = f"the provider reported the stream terminated since {since:%Y-%m-%d %H:%M:%S} UTC"
    for kind in (NotificationKind.OPENED, NotificationKind.RESOLVED):
        mail = Notification.objects.get(kind=kind)
        text = " ".join(mail.body_text.split())
        html = " ".join(mail.body_html.split())
        channel_text = " ".join(ChannelMessage.objects.get(kind=kind).payload["text"].split())
        assert f"Condition: {stated}" in text
        if kind == NotificationKind.OPENED:
            assert f"Condition: {stated}" in channel_text
        for body in (text, channel_text):
            assert "0 failed" not in body and "Failed so far: 0" not in body
        assert "Provider's message: Too many errors" in text
        assert "none of the stream's deliveries failed" in text
        assert "<strong>terminated</strong>" in html and "0 failed" not in html


def test_a_stream_already_stopped_when_first_seen_counts_the_failures_that_stopped_it() -> None:
    """The provider stopped the stream hours ago, after its receiver refused everything: the incident's impact
    counts those failures (from the start of the run after the last delivered one), and its page says when the
    provider's status began and since when deliveries failed, not "none failed" since our first look."""
    now = fixed_now()
    source = make_source()
    store(source, record(now - timedelta(hours=11), block=18_999_000))
    down = now - timedelta(hours=10)
    store(source, *[record(down + timedelta(minutes=i), error="connect ECONNREFUSED 203.0.113.7:443", retries=7,
                           block=19_000_000 + i) for i in range(5)])
    status_since = down + timedelta(minutes=12)
    Stream.objects.filter(stream_id=STREAM).update(
        provider_status="error", provider_status_since=status_since, provider_status_message="Success rate below 70%"
    )
    make_rule("Stream down at the provider", condition="provider_error_state")
    evaluate.evaluate_all(now)
    incident = Incident.objects.get()

    assert incident.details["status_since"] == status_since.isoformat()
    text = " ".join(Notification.objects.get(kind=NotificationKind.OPENED).body_text.split())
    assert f"reported the stream error since {status_since:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "none of the stream's deliveries failed" not in text
    from django.test import Client

    from tests.conftest import make_user

    client = Client()
    client.force_login(make_user("viewer"))
    page = " ".join(client.get(incident.get_absolute_url()).content.decode().split())
    assert f"since {status_since:%Y-%m-%d %H:%M:%S} UTC when the incident opened" in page
    assert f"its deliveries had been failing since {down:%Y-%m-%d %H:%M:%S} UTC" in page
    assert "none of the stream's deliveries failed" not in page


def test_the_providers_own_start_of_an_error_dates_the_status() -> None:
    from dashboard.upstream.streams import Stream as ProviderStream

    now = fixed_now()
    source = make_source()
    store(source, record(now - timedelta(hours=11)))
    began = now - timedelta(hours=9, minutes=48)
    item = ProviderStream.parse({
        "id": STREAM, "webhookUrl": "https://hooks.example.com/in", "description": "", "tag": "orders",
        "chainIds": ["0x1"], "status": "error", "statusMessage": "Success rate below 70%",
        "isErrorSince": began.isoformat(),
    })
    Stream.objects.record_provider_streams(source, [item], now)
    assert Stream.objects.get(stream_id=STREAM).provider_status_since == began
