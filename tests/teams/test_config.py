"""Teams in configuration as code: export_config writes each team's claims and alert addresses and each channel's
team; import_config makes them again, changes nothing the second time, and names a team no one has."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.management.base import CommandError

from dashboard.accounts.models import Team
from dashboard.alerts.models import AlertRule, Channel, ChannelKind
from tests.alerts.test_config_file import _channel, export, run_import, write

pytestmark = pytest.mark.django_db

HOOK_URL = "https://hooks.example.com/in/payments-secret-path"


@pytest.fixture(autouse=True)
def no_default_rules(db: None) -> None:
    AlertRule.objects.all().delete()


def test_teams_and_their_channels_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHANNEL_PAYMENTS_HOOK_URL", HOOK_URL)
    payments = Team.objects.create(name="Payments", stream_ids=["s-1", "s-2"], tag_patterns=["payments-*"],
                                   alert_emails="pay-oncall@example.com")
    Team.objects.create(name="NFT", tag_patterns=["nft-*", "mint-??"])
    hook = _channel("payments hook", ChannelKind.WEBHOOK, url=HOOK_URL, secret="whsec-0123456789abcdef")
    hook.team = payments
    hook.save()
    monkeypatch.setenv("CHANNEL_PAYMENTS_HOOK_SECRET", "whsec-0123456789abcdef")

    first = export()
    assert HOOK_URL not in first
    document = yaml.safe_load(first)
    assert document["teams"] == [
        {"name": "NFT", "tag_patterns": ["nft-*", "mint-??"]},
        {"name": "Payments", "stream_ids": ["s-1", "s-2"], "tag_patterns": ["payments-*"],
         "alert_emails": "pay-oncall@example.com"},
    ]
    assert document["channels"][0]["team"] == "Payments"

    Channel.objects.all().delete()
    Team.objects.all().delete()
    output = run_import(write(tmp_path, first))
    assert 'created team "Payments"' in output and 'created channel "payments hook"' in output
    assert Channel.objects.get(name="payments hook").team == Team.objects.get(name="Payments")
    assert Team.objects.get(name="NFT").tag_patterns == ["nft-*", "mint-??"]
    assert export() == first
    assert run_import(write(tmp_path, first)).strip() == "Nothing to change."


def test_a_channel_naming_a_team_no_one_has_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK", "json://hooks.example.com/x")
    text = "channels:\n- name: stray\n  kind: apprise\n  team: Ghosts\n  url: {env: HOOK}\n"
    with pytest.raises(CommandError, match='channels\\[0\\] \\(name "stray"\\): team: no team named "Ghosts"'):
        run_import(write(tmp_path, text))
    assert not Channel.objects.exists()
