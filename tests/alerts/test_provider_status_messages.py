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
