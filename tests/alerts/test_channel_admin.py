"""Channels in the admin: write-only encrypted URL and secret, a test message, the last delivery's result."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from dashboard import encryption
from dashboard.alerts import channels
from dashboard.alerts.models import (
    Channel,
    ChannelKind,
    ChannelMessage,
    NotificationKind,
    NotificationStatus,
)
from tests.alerts.receiver import receiver

pytestmark = pytest.mark.django_db

SECRET = "whsec-do-not-show-0123456789"


def add(staff: Client, **fields: str) -> str:
    data = {"name": "ops hook", "kind": ChannelKind.WEBHOOK, "enabled": "on", "new_url": "", "new_secret": ""}
    data.update(fields)
    response = staff.post("/admin/alerts/channel/add/", data, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def test_a_webhook_channel_is_stored_encrypted_and_never_shown(staff: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    add(staff, new_url="https://hooks.example.com/in/tok3n-path", new_secret=SECRET)
    channel = Channel.objects.get()
    assert SECRET not in channel.secret_encrypted and "tok3n-path" not in channel.url_encrypted
    assert encryption.decrypt(channel.secret_encrypted) == SECRET
    assert channel.url_hint == "https://hooks.example.com"

    for path in (f"/admin/alerts/channel/{channel.pk}/change/", "/admin/alerts/channel/"):
        page = staff.get(path).content.decode()
        assert SECRET not in page and "tok3n-path" not in page
        assert channel.secret_encrypted not in page
    assert "A secret is stored" in staff.get(f"/admin/alerts/channel/{channel.pk}/change/").content.decode()
    assert SECRET not in caplog.text and "tok3n-path" not in caplog.text


def test_leaving_the_fields_empty_keeps_what_is_stored(staff: Client) -> None:
    add(staff, new_url="https://hooks.example.com/in", new_secret=SECRET)
    channel = Channel.objects.get()
    response = staff.post(
        f"/admin/alerts/channel/{channel.pk}/change/",
        {"name": "renamed", "kind": ChannelKind.WEBHOOK, "enabled": "on", "new_url": "", "new_secret": ""},
        follow=True,
    )
    assert response.status_code == 200
    channel.refresh_from_db()
    assert channel.name == "renamed"
    assert encryption.decrypt(channel.secret_encrypted) == SECRET
    assert encryption.decrypt(channel.url_encrypted) == "https://hooks.example.com/in"


def test_bad_settings_are_refused_with_a_message(staff: Client) -> None:
    page = add(staff, new_url="https://hooks.example.com/in", new_secret="short")
    assert "signing secret of at least 16 characters" in page
    page = add(staff, kind=ChannelKind.SLACK, new_url="https://example.com/not-a-slack-hook?token=zz")
    assert "Apprise does not recognise this URL" in page
    assert not Channel.objects.exists()


def test_a_slack_channel_from_the_url_slack_gives(staff: Client) -> None:
    add(staff, name="slack", kind=ChannelKind.SLACK, new_url="https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX")
    channel = Channel.objects.get()
    assert channel.url_hint == "Slack (https://…)"
    assert "XXXXXXXXXXXXXXXX" not in staff.get("/admin/alerts/channel/").content.decode()


def test_send_test_records_the_result_on_the_channel(staff: Client, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    with receiver() as server:
        add(staff, new_url=server.url + "/hook", new_secret=SECRET)
        channel = Channel.objects.get()
        with django_capture_on_commit_callbacks() as callbacks:
            response = staff.post(
                "/admin/alerts/channel/",
                {"action": "send_test", "_selected_action": [str(channel.pk)]},
                follow=True,
            )
        assert "test message queued" in response.content.decode()
        assert len(callbacks) == 1
        delivery = ChannelMessage.objects.get()
        assert delivery.kind == NotificationKind.TEST

        assert channels.CHANNELS.send(delivery.pk) == NotificationStatus.SENT
        (request,) = server.requests
        assert request.json()["event"] == "test"
    channel.refresh_from_db()
    assert channel.last_attempt_ok is True
    page = staff.get("/admin/alerts/channel/").content.decode()
    assert "accepted: [TEST] Alert channel" in page


