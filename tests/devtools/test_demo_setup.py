"""demo_setup: a staff login, and the demo's rules made once by name and never reset."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from dashboard.alerts.models import AlertRule, Condition

pytestmark = pytest.mark.django_db


def test_the_demo_rules_are_made_once_and_an_operators_change_stays() -> None:
    call_command("demo_setup", "--username", "demo", "--password", "demo-dashboard-pw")
    rules = {rule.name: rule for rule in AlertRule.objects.filter(name__endswith="(demo)")}
    assert {rule.condition for rule in rules.values()} == {
        Condition.LATENCY_P95, Condition.QUIET_STREAM, Condition.MISSING_BLOCKS}
    assert rules["Slow deliveries (demo)"].latency_seconds == 120
    assert rules["Missing blocks (demo)"].window_minutes == 1440
    slow = rules["Slow deliveries (demo)"]
    slow.latency_seconds, slow.enabled = 300, False
    slow.save()
    call_command("demo_setup", "--username", "demo", "--password", "demo-dashboard-pw")
    assert AlertRule.objects.filter(name__endswith="(demo)").count() == 3
    slow.refresh_from_db()
    assert slow.latency_seconds == 300 and not slow.enabled
    assert User.objects.get(username="demo").is_staff


def test_the_team_login_sees_the_payment_streams_only(client: Client) -> None:
    from tests.factories import history_record, make_source, store

    store(make_source(), history_record(stream_id="s-usdc", tag="usdc-transfers"),
          history_record(stream_id="s-nft", tag="nft-sales"))
    call_command("demo_setup", "--username", "demo", "--password", "demo-dashboard-pw")
    call_command("demo_setup", "--username", "demo", "--password", "demo-dashboard-pw")
    member = User.objects.get(username="payments")
    assert member.check_password("demo-dashboard-pw")
    client.force_login(member)
    streams = client.get("/streams/").content.decode()
    assert "usdc-transfers" in streams and "nft-sales" not in streams
    assert User.objects.get(username="payments").teams.get().name == "Payments"
