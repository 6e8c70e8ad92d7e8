"""Alert rules, channels and maintenance windows through the API: the admin's forms check them, the admin's
history records each change under the token's name, a channel's URL and secret are never answered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.test import Client

from dashboard import encryption
from dashboard.alerts.models import AlertRule, Channel, ChannelKind, ChannelMessage
from dashboard.expectations.models import MaintenanceWindow
from tests.api.conftest import bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

HOOK_URL = "https://hooks.example.com/in/path-secret-7"
HOOK_SECRET = "whsec-api-never-answered-0123"


@pytest.fixture
def client(db: None) -> Client:
    return bearer(token_for(make_user("ops", staff=True), ["admin"], name="config-bot"))


def _send(client: Client, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    return getattr(client, method)(url, json.dumps(body or {}), content_type="application/json")


def _entry(obj: Any) -> LogEntry:
    return LogEntry.objects.filter(object_id=str(obj.pk)).latest("pk")


def test_an_alert_rule_is_created_changed_and_deleted_as_in_the_admin(client: Client) -> None:
    hook = Channel.objects.create(name="hook", kind=ChannelKind.SLACK)
    response = _send(client, "post", "/api/v1/alert-rules", {
        "name": "API rule", "condition": "failure_rate", "threshold_percent": 20, "channels": [hook.pk],
    })
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["window_minutes"] == 15 and body["threshold_percent"] == 20
    assert body["channels"] == [{"id": hook.pk, "name": "hook"}]
    rule = AlertRule.objects.get(name="API rule")
    entry = _entry(rule)
    assert entry.action_flag == ADDITION and entry.user.username == "ops"
    assert entry.get_change_message() == "Added. Through the API by ops (token config-bot)."

    response = _send(client, "patch", f"/api/v1/alert-rules/{rule.pk}", {"window_minutes": 30, "enabled": False})
    assert response.status_code == 200, response.content
    rule.refresh_from_db()
    assert rule.window_minutes == 30 and not rule.enabled and rule.threshold_percent == 20
    assert list(rule.channels.all()) == [hook]
    entry = _entry(rule)
    assert entry.action_flag == CHANGE
    assert "Window minutes" in entry.get_change_message() and "token config-bot" in entry.get_change_message()

    assert client.get(f"/api/v1/alert-rules/{rule.pk}").json()["name"] == "API rule"
    assert [r["name"] for r in client.get("/api/v1/alert-rules").json()["items"]] == [
        r.name for r in AlertRule.objects.order_by("name")
    ]

    response = client.delete(f"/api/v1/alert-rules/{rule.pk}")
    assert response.status_code == 204
    assert not AlertRule.objects.filter(pk=rule.pk).exists()
    entry = LogEntry.objects.filter(object_id=str(rule.pk), action_flag=DELETION).get()
    assert entry.object_repr == "API rule" and "token config-bot" in entry.get_change_message()


def test_the_admin_forms_rules_refuse_by_field(client: Client) -> None:
    response = _send(client, "post", "/api/v1/alert-rules", {
        "name": "stale", "condition": "poller_stale", "scope": "stream", "scope_value": "x",
    })
    assert response.status_code == 400
    assert any(e.startswith("scope: The poller-stale condition") for e in response.json()["errors"])
    response = _send(client, "post", "/api/v1/alert-rules", {"name": "gap", "condition": "missing_blocks",
                                                              "window_minutes": 60})
    assert any(e.startswith("window_minutes: Missing blocks") for e in response.json()["errors"])
    response = _send(client, "post", "/api/v1/alert-rules", {"name": "x", "windw_minutes": 5})
    assert response.status_code == 400 and "windw_minutes" in " ".join(response.json()["errors"])
    assert not AlertRule.objects.filter(name__in=["stale", "gap", "x"]).exists()
    assert not LogEntry.objects.exists()


def test_a_channels_url_and_secret_are_write_only(client: Client) -> None:
    response = _send(client, "post", "/api/v1/channels", {
        "name": "receiver", "kind": "webhook", "url": HOOK_URL, "secret": HOOK_SECRET,
    })
    assert response.status_code == 200, response.content
    text = response.content.decode()
    assert HOOK_SECRET not in text and "path-secret" not in text
    body = response.json()
    assert body["url_hint"] == "https://hooks.example.com" and body["url_stored"] and body["secret_stored"]
    channel = Channel.objects.get()
    assert encryption.decrypt(channel.secret_encrypted) == HOOK_SECRET

    # Left out, the URL and secret stay.
    response = _send(client, "patch", f"/api/v1/channels/{channel.pk}", {"name": "renamed"})
    assert response.status_code == 200
    channel.refresh_from_db()
    assert channel.name == "renamed" and encryption.decrypt(channel.url_encrypted) == HOOK_URL
    response = _send(client, "patch", f"/api/v1/channels/{channel.pk}", {"secret": "short"})
    assert response.status_code == 400
    assert response.json()["errors"] == ["secret: Enter a signing secret of at least 16 characters."]
    assert "short" not in response.content.decode().replace("Enter a signing secret", "")

    for url in ("/api/v1/channels", f"/api/v1/channels/{channel.pk}"):
        page = client.get(url).content.decode()
        assert HOOK_SECRET not in page and "path-secret" not in page
    for entry in LogEntry.objects.all():
        assert HOOK_SECRET not in entry.change_message and "path-secret" not in entry.change_message
    assert "URL" in _entry(channel).get_change_message() or "Name" in _entry(channel).get_change_message()


def test_a_channel_test_goes_through_the_outbox(client: Client, django_capture_on_commit_callbacks: Any) -> None:
    channel = Channel.objects.create(name="slack", kind=ChannelKind.SLACK)
    with django_capture_on_commit_callbacks():
        response = client.post(f"/api/v1/channels/{channel.pk}/test")
    assert response.status_code == 200, response.content
    message = ChannelMessage.objects.get()
    assert response.json()["message_id"] == message.pk and message.kind == "test"
    response = client.delete(f"/api/v1/channels/{channel.pk}")
    assert response.status_code == 204 and not Channel.objects.exists()


def test_maintenance_windows_are_listed_created_and_deleted(client: Client) -> None:
    response = _send(client, "post", "/api/v1/maintenance-windows", {
        "name": "Sunday deploys", "scope": "tag", "scope_value": "orders", "cron": "0 3 * * 0",
        "duration_minutes": 45, "time_zone": "Europe/Berlin",
    })
    assert response.status_code == 200, response.content
    window = MaintenanceWindow.objects.get()
    assert window.created_by == "ops (token config-bot)"
    assert "Europe/Berlin" in response.json()["schedule"]
    assert [w["id"] for w in client.get("/api/v1/maintenance-windows").json()["items"]] == [window.pk]
    response = _send(client, "post", "/api/v1/maintenance-windows", {
        "name": "bad", "scope": "all", "cron": "61 * * * *", "duration_minutes": 5,
    })
    assert response.status_code == 400
    assert any(e.startswith("cron: Not a cron expression") for e in response.json()["errors"])
    response = _send(client, "post", "/api/v1/maintenance-windows", {"name": "zone", "scope": "all",
                                                                     "cron": "0 3 * * *", "duration_minutes": 5,
                                                                     "time_zone": "Mars/Olympus"})
    assert response.status_code == 400 and response.json()["errors"][0].startswith("time_zone:")
    assert client.delete(f"/api/v1/maintenance-windows/{window.pk}").status_code == 204
    assert not MaintenanceWindow.objects.exists()
    assert LogEntry.objects.filter(action_flag=DELETION, object_id=str(window.pk)).exists()


def test_lists_are_bounded(client: Client) -> None:
    for n in range(3):
        Channel.objects.create(name=f"c{n}", kind=ChannelKind.SLACK)
    first = client.get("/api/v1/channels?limit=2").json()
    assert [c["name"] for c in first["items"]] == ["c0", "c1"]
    second = client.get(first["next"]).json()
    assert [c["name"] for c in second["items"]] == ["c2"] and second["next"] is None
    assert client.get("/api/v1/channels?limit=500").status_code == 400
    assert client.get("/api/v1/maintenance-windows?cursor=abc").status_code == 400


def test_a_cursor_no_name_can_follow_is_refused(client: Client) -> None:
    from dashboard.api.pages import key_cursor

    cursor = key_cursor("a\x00b")
    for path in ("/api/v1/alert-rules", "/api/v1/channels"):
        response = client.get(f"{path}?cursor={cursor}")
        assert response.status_code == 400 and "cursor" in response.json()["detail"]
