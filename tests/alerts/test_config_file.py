"""Configuration as code: export_config and import_config round-trip the alert rules, channels, maintenance
windows and stream objectives; an import is idempotent, --dry-run writes nothing, --prune removes what the file
lacks, one bad entry refuses the whole file, and a secret appears in no file and no output."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard import encryption
from dashboard.accounts.models import Team
from dashboard.alerts import channels
from dashboard.alerts.models import AlertRule, Channel, ChannelKind
from dashboard.expectations.models import MaintenanceWindow, StreamObjective
from tests.alerts.factories import make_rule

pytestmark = pytest.mark.django_db

SLACK_URL = "https://hooks.slack.com/services/T000/B000/SLACKSECRETTOKEN1234"
HOOK_URL = "https://hooks.example.com/in/hook-path-secret"
HOOK_SECRET = "whsec-never-in-a-file-0123456789"
PD_KEY = "pd-routing-key-never-shown-42"
SECRETS = (SLACK_URL, "SLACKSECRETTOKEN1234", "hook-path-secret", HOOK_SECRET, PD_KEY)
STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"


def _channel(name: str, kind: str, url: str = "", secret: str = "") -> Channel:
    channel = Channel(name=name, kind=kind)
    channels.store_settings(channel, url=url or None, secret=secret or None)
    channel.save()
    return channel


def populate() -> None:
    slack = _channel("ops slack", ChannelKind.SLACK, url=SLACK_URL)
    hook = _channel("receiver hook", ChannelKind.WEBHOOK, url=HOOK_URL, secret=HOOK_SECRET)
    _channel("pager", ChannelKind.PAGERDUTY, secret=PD_KEY)
    rule = make_rule("Failed deliveries", scope="stream", scope_value=STREAM, digest="daily")
    rule.channels.set([slack, hook])
    make_rule("Quiet", condition="quiet_stream", quiet_probability=0.0005, enabled=False, recipients="")
    MaintenanceWindow.objects.create(name="Sunday deploys", scope="tag", scope_value="orders", cron="0 3 * * 0",
                                     duration_minutes=45, time_zone="Europe/Berlin", reason="weekly release")
    MaintenanceWindow.objects.create(name="Migration", scope="all", starts_at=datetime(2026, 12, 1, 2, tzinfo=UTC),
                                     ends_at=datetime(2026, 12, 1, 4, tzinfo=UTC))
    StreamObjective.objects.create(stream_id=STREAM, delivery="first_attempt", delivery_target=Decimal("99.5"),
                                   latency_seconds=30)


def wipe() -> None:
    AlertRule.objects.all().delete()
    Channel.objects.all().delete()
    MaintenanceWindow.objects.all().delete()
    StreamObjective.objects.all().delete()


def export() -> str:
    out = StringIO()
    call_command("export_config", stdout=out)
    return out.getvalue()


def run_import(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("import_config", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "CHANNEL_OPS_SLACK_URL": SLACK_URL, "CHANNEL_RECEIVER_HOOK_URL": HOOK_URL,
        "CHANNEL_RECEIVER_HOOK_SECRET": HOOK_SECRET, "CHANNEL_PAGER_SECRET": PD_KEY,
    }.items():
        monkeypatch.setenv(name, value)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def snapshot() -> list[Any]:
    return [
        list(AlertRule.objects.order_by("name").values()),
        list(Channel.objects.order_by("name").values()),
        list(MaintenanceWindow.objects.order_by("name").values()),
        list(StreamObjective.objects.order_by("stream_id").values()),
        sorted(AlertRule.channels.through.objects.values_list("alertrule__name", "channel__name")),
    ]


def test_it_round_trips_through_an_empty_database(tmp_path: Path, environment: None) -> None:
    populate()
    first = export()
    for secret in SECRETS:
        assert secret not in first
    document = yaml.safe_load(first)
    assert document["channels"][1] == {"name": "pager", "kind": "pagerduty", "enabled": True,
                                       "secret": {"env": "CHANNEL_PAGER_SECRET"}}
    assert document["alert_rules"][0]["channels"] == ["ops slack", "receiver hook"]
    assert "muted_until" not in document["alert_rules"][0]

    wipe()
    output = run_import(write(tmp_path, first))
    assert "created channel \"ops slack\"" in output and "created alert rule \"Quiet\"" in output
    assert "Applied: 8 to create, 0 to change, 0 to remove." in output
    assert export() == first
    hook = Channel.objects.get(name="receiver hook")
    assert encryption.decrypt(hook.url_encrypted) == HOOK_URL and encryption.decrypt(hook.secret_encrypted) == HOOK_SECRET
    assert hook.url_hint == "https://hooks.example.com"
    assert MaintenanceWindow.objects.get(name="Sunday deploys").created_by == "import_config"

    # A second import changes nothing, not even a secret's ciphertext.
    before = snapshot()
    assert run_import(write(tmp_path, first)).strip() == "Nothing to change."
    assert snapshot() == before
    for secret in SECRETS:
        assert secret not in output


def test_a_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path, environment: None) -> None:
    populate()
    document = yaml.safe_load(export())
    document["alert_rules"][0]["window_minutes"] = 30
    document["alert_rules"][0]["channels"] = ["pager"]
    document["maintenance_windows"].append({"name": "Freeze", "scope": "all", "starts_at": "2026-12-24T00:00:00Z",
                                            "ends_at": "2026-12-27T00:00:00Z"})
    del document["stream_objectives"][0]
    before = snapshot()
    output = run_import(write(tmp_path, yaml.safe_dump(document)), "--dry-run")
    assert snapshot() == before
    assert ('would change alert rule "Failed deliveries": window_minutes: 15 → 30; '
            'channels: ["ops slack", "receiver hook"] → ["pager"]') in output
    assert 'would create maintenance window "Freeze"' in output
    assert f'kept stream objective "{STREAM}": not in the file (--prune removes it)' in output
    assert "Dry run: 1 to create, 1 to change, 0 to remove; nothing was written." in output

    run_import(write(tmp_path, yaml.safe_dump(document)))
    rule = AlertRule.objects.get(name="Failed deliveries")
    assert rule.window_minutes == 30 and [c.name for c in rule.channels.all()] == ["pager"]
    assert StreamObjective.objects.exists()


def test_prune_removes_what_the_file_lacks(tmp_path: Path, environment: None) -> None:
    populate()
    document = yaml.safe_load(export())
    document["alert_rules"] = [r for r in document["alert_rules"] if r["name"] != "Quiet"]
    document["channels"] = [c for c in document["channels"] if c["name"] != "pager"]
    document["maintenance_windows"] = []
    path = write(tmp_path, yaml.safe_dump(document))
    output = run_import(path, "--prune", "--dry-run")
    assert 'would remove alert rule "Quiet"' in output and 'would remove channel "pager"' in output
    assert MaintenanceWindow.objects.count() == 2
    output = run_import(path, "--prune")
    assert 'removed maintenance window "Migration"' in output
    assert set(AlertRule.objects.values_list("name", flat=True)) == {"Failed deliveries"}
    assert set(Channel.objects.values_list("name", flat=True)) == {"ops slack", "receiver hook"}
    assert not MaintenanceWindow.objects.exists()


def test_a_changed_secret_is_said_without_its_value(tmp_path: Path, environment: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    populate()
    path = write(tmp_path, export())
    monkeypatch.setenv("CHANNEL_RECEIVER_HOOK_SECRET", "whsec-the-new-one-987654321")
    output = run_import(path)
    assert 'changed channel "receiver hook": secret (from the environment; not shown)' in output
    assert "whsec-the-new-one" not in output and HOOK_SECRET not in output
    hook = Channel.objects.get(name="receiver hook")
    assert encryption.decrypt(hook.secret_encrypted) == "whsec-the-new-one-987654321"


def test_an_unset_variable_is_refused_by_name(tmp_path: Path, environment: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    populate()
    path = write(tmp_path, export())
    wipe()
    monkeypatch.delenv("CHANNEL_PAGER_SECRET")
    with pytest.raises(CommandError) as caught:
        run_import(path)
    message = str(caught.value)
    assert 'channels[1] (name "pager"): secret: the environment variable CHANNEL_PAGER_SECRET is not set' in message
    assert "nothing was changed" in message
    assert not Channel.objects.exists() and not AlertRule.objects.exists()


def test_a_secret_written_in_the_file_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump({"channels": [{"name": "hook", "kind": "webhook", "url": HOOK_URL, "secret": HOOK_SECRET}]})
    with pytest.raises(CommandError) as caught:
        run_import(write(tmp_path, text))
    assert "never written in the file" in str(caught.value)
    assert HOOK_SECRET not in str(caught.value) and "hook-path-secret" not in str(caught.value)
    assert not Channel.objects.exists()


def test_bad_entries_are_named_and_nothing_is_half_applied(tmp_path: Path) -> None:
    text = yaml.safe_dump({
        "alert_rules": [
            {"name": "fine", "condition": "any_failure"},
            {"name": "stale", "condition": "poller_stale", "scope": "stream", "scope_value": "x"},
            {"name": "gap", "condition": "missing_blocks", "window_minutes": 60},
            {"name": "typo", "windw_minutes": 5},
            {"name": "paged", "channels": ["nowhere"]},
        ],
        "maintenance_windows": [{"name": "bad cron", "scope": "all", "cron": "61 * * * *", "duration_minutes": 5}],
        "stream_objectives": [{"stream_id": STREAM, "delivery_target": 100}],
    })
    path = write(tmp_path, text)
    with pytest.raises(CommandError) as caught:
        run_import(path)
    message = str(caught.value)
    # Shape problems first (an unknown field is refused before anything is checked).
    assert 'alert_rules[3] (name "typo"): "windw_minutes": not a field of this section' in message
    text = text.replace("windw_minutes", "window_minutes")
    with pytest.raises(CommandError) as caught:
        run_import(write(tmp_path, text))
    message = str(caught.value)
    assert 'alert_rules[1] (name "stale"): scope: The poller-stale condition watches every source' in message
    assert 'alert_rules[2] (name "gap"): window_minutes: Missing blocks: at least 1440 minutes' in message
    assert 'alert_rules[4] (name "paged"): channels: no channel named "nowhere"' in message
    assert 'maintenance_windows[0] (name "bad cron"): cron: Not a cron expression' in message
    assert f'stream_objectives[0] (stream_id "{STREAM}"): delivery_target: A percentage above 0' in message
    assert not AlertRule.objects.exists() and not MaintenanceWindow.objects.exists()


def test_export_refuses_windows_it_cannot_name_apart(db: None) -> None:
    for _ in range(2):
        MaintenanceWindow.objects.create(name="twice", scope="all", cron="0 3 * * *", duration_minutes=5)
    with pytest.raises(CommandError, match='several are named "twice"'):
        export()


def test_export_writes_to_a_file(tmp_path: Path) -> None:
    populate()
    path = tmp_path / "out.yaml"
    call_command("export_config", "--output", str(path))
    assert path.read_text() == export()
    assert path.read_text().startswith("# Stream Dashboard configuration")


def test_the_readmes_example_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Configuration as code"):]
    example = section[section.index("```yaml\n") + len("```yaml\n"):section.index("```\n", section.index("```yaml"))]
    monkeypatch.setenv("SLACK_OPS_URL", SLACK_URL)
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", PD_KEY)
    output = run_import(write(tmp_path, example))
    assert "Applied: 7 to create, 0 to change, 0 to remove." in output
    assert Team.objects.get(name="Payments").tag_patterns == ["payments-*"]
    assert [c.name for c in AlertRule.objects.get(name="Failed deliveries").channels.order_by("name")] == [
        "ops slack", "pager"]
    assert run_import(write(tmp_path, example)).strip() == "Nothing to change."


def test_with_a_user_each_change_is_in_the_admins_history(tmp_path: Path, environment: None) -> None:
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry

    from tests.conftest import make_user

    populate()
    document = yaml.safe_load(export())
    make_user("deployer", staff=True)
    document["alert_rules"][0]["window_minutes"] = 30
    document["channels"] = [c for c in document["channels"] if c["name"] != "pager"]
    document["maintenance_windows"].append({"name": "Freeze", "scope": "all", "cron": "0 0 24 12 *",
                                            "duration_minutes": 4320})
    path = write(tmp_path, yaml.safe_dump(document))
    run_import(path, "--prune", "--dry-run", "--user", "deployer")
    assert not LogEntry.objects.exists()
    run_import(path, "--prune", "--user", "deployer")
    entries = {(e.object_repr, e.action_flag): e.get_change_message() for e in LogEntry.objects.all()}
    assert entries == {
        ("Failed deliveries", CHANGE): "Changed window_minutes. Through import_config (config.yaml).",
        ("pager", DELETION): "Deleted. Through import_config (config.yaml).",
        ("Freeze", ADDITION): "Added. Through import_config (config.yaml).",
    }
    assert {e.user.username for e in LogEntry.objects.all()} == {"deployer"}
    with pytest.raises(CommandError, match="no user named nobody"):
        run_import(path, "--user", "nobody")
