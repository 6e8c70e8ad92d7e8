"""Two teams with a stream each, and everything a stream can have: deliveries (failing ones with their error
groups, decoded payloads), rollups, an incident with its mail and channel message, an alert rule, a replay, an
outage window, a maintenance window and objectives. Team A's member must see nothing of team B's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import Team, TeamMembership
from dashboard.accounts.roles import TEAM_MEMBERS
from dashboard.actions.models import ProviderAction
from dashboard.actions.services import prepare_replay
from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationKind, Scope, TargetKind
from dashboard.deliveries.models import Delivery, OutageWindow, Stream, WindowKind
from dashboard.expectations.models import MaintenanceWindow, StreamObjective, WindowScope
from tests.conftest import make_user
from tests.factories import history_record, make_source, store

STREAM_A = "a1a1a1a1-0000-4000-8000-00000000000a"
STREAM_B = "b2b2b2b2-0000-4000-8000-00000000000b"
TAG_A, TAG_B = "alpha-orders", "bravo-payments"
URL_A, URL_B = "https://alpha-hooks.example.com/in", "https://bravo-hooks.example.com/in"
ERROR_B = "HTTP 502 from bravogateway upstream"
TX_B = "0x" + "bb" * 32
TX_A = "0x" + "aa" * 32
DELIVERIES_A, DELIVERIES_B = 3, 7


def payload(tx: str, address: str) -> dict[str, Any]:
    return {
        "confirmed": True, "chainId": "0x1", "streamId": "", "tag": "", "retries": 0,
        "block": {"number": "19000000", "hash": "0x" + "cd" * 32, "timestamp": "1732000000"},
        "logs": [], "txs": [{"hash": tx, "fromAddress": address, "toAddress": address, "value": "1"}],
        "txsInternal": [], "abi": [], "erc20Transfers": [], "erc20Approvals": [], "nftTransfers": [],
        "nftApprovals": {"ERC721": [], "ERC1155": []}, "nativeBalances": [],
    }


@dataclass
class TwoTeams:
    team_a: Team
    team_b: Team
    member_a: User
    member_b: User
    delivery_a: Delivery
    delivery_b: Delivery
    incident_a: Incident
    incident_b: Incident
    notification_b: Notification
    rule_b: AlertRule
    action_b: ProviderAction
    window_b: OutageWindow
    maintenance_b: MaintenanceWindow
    staff: User

    def secrets_of_b(self) -> list[str]:
        """What of team B's a member of team A must never read."""
        return [STREAM_B, TAG_B, URL_B, "bravo-hooks", "bravogateway", TX_B[2:], str(self.delivery_b.pk),
                self.rule_b.name, self.maintenance_b.name]


def member(username: str, team: Team) -> User:
    user = make_user(username, role=TEAM_MEMBERS)
    TeamMembership.objects.create(team=team, user=user)
    return User.objects.get(pk=user.pk)


def session(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_teams(db: None) -> TwoTeams:
    source = make_source()
    now = timezone.now()
    records = []
    for i in range(DELIVERIES_A):
        records.append(history_record(
            date=now - timedelta(minutes=10 + i), stream_id=STREAM_A, tag=TAG_A, webhook_url=URL_A,
            error="connect ECONNREFUSED 10.0.0.1:443" if i == 0 else "", retries=1 if i == 0 else 0,
            block=19_000_000 + i, payload=payload(TX_A if i == 0 else "0x" + f"{i:064x}", "0x" + "a0" * 20),
        ))
    for i in range(DELIVERIES_B):
        records.append(history_record(
            date=now - timedelta(minutes=20 + i), stream_id=STREAM_B, tag=TAG_B, webhook_url=URL_B,
            error=ERROR_B if i < 3 else "", retries=2 if i < 3 else 0, block=19_100_000 + i,
            payload=payload(TX_B if i == 0 else "0x" + f"{i + 100:064x}", "0x" + "b0" * 20),
        ))
    store(source, *records)
    team_a = Team.objects.create(name="Alpha", stream_ids=[STREAM_A])
    team_b = Team.objects.create(name="Bravo", tag_patterns=["bravo-*"])
    delivery_a = Delivery.objects.filter(stream_id=STREAM_A).exclude(error_message="").get()
    delivery_b = Delivery.objects.filter(stream_id=STREAM_B).exclude(error_message="").order_by("date").first()
    assert delivery_b is not None
    rule_a = AlertRule.objects.create(name="Alpha stream failing", scope=Scope.STREAM, scope_value=STREAM_A)
    rule_b = AlertRule.objects.create(name="Bravo stream failing", scope=Scope.STREAM, scope_value=STREAM_B)
    incidents = {}
    for rule, stream, tag in ((rule_a, STREAM_A, TAG_A), (rule_b, STREAM_B, TAG_B)):
        incidents[stream] = Incident.objects.create(
            rule=rule, target_kind=TargetKind.STREAM, target_key=stream, stream_id=stream, label=tag,
            summary=f"stream {tag} failing", opened_at=now, last_holding_at=now, message_id=f"<{stream}@example.com>",
        )
    notification_b = Notification.objects.create(
        kind=NotificationKind.OPENED, rule=rule_b, incident=incidents[STREAM_B], recipients=["ops@example.com"],
        subject=f"stream {TAG_B} failing", body_text=f"stream {TAG_B} failing", message_id="<n-b@example.com>",
        created_at=now, next_attempt_at=now,
    )
    staff = make_user("staffer", staff=True)
    action_b = prepare_replay(staff, Delivery.objects.filter(pk=delivery_b.pk), scope="Replay one delivery")
    window_b = OutageWindow.objects.create(
        stream=Stream.objects.get(stream_id=STREAM_B), kind=WindowKind.MARKED, label="bravo reload",
        start=now - timedelta(hours=2), end=now - timedelta(hours=1), marked_by_name="staffer",
    )
    maintenance_b = MaintenanceWindow.objects.create(
        name="Bravo upgrade", scope=WindowScope.STREAM, scope_value=STREAM_B,
        starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
    )
    StreamObjective.objects.create(stream_id=STREAM_B, note="bravo objective")
    return TwoTeams(
        team_a, team_b, member("anna", team_a), member("bruno", team_b), delivery_a, delivery_b,
        incidents[STREAM_A], incidents[STREAM_B], notification_b, rule_b, action_b, window_b, maintenance_b, staff,
    )
