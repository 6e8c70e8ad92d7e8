"""The missing-blocks alert condition: a stream holds while blocks a scan or an audit previewed within the window,
matched by the stream, have no stored delivery; a delivery of the block stored (a re-send polled, a late poll)
clears it; the rule's scope and window narrow it; one finding per block, however many scans previewed it. (Found
against the simulator, re-sent and resolved: tests/actions/test_audit.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.core import mail as outbox

from dashboard.actions.models import BlockScan, PreviewedBlock, ScanState
from dashboard.alerts import conditions, evaluate
from dashboard.alerts.forms import AlertRuleForm
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Condition, Scope, TargetKind
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.sources.models import Source
from tests.alerts.factories import OTHER_STREAM, STREAM, fixed_now, make_rule, make_source, record, store

pytestmark = pytest.mark.django_db


def previewed(source: Source, stream_id: str, at: datetime, blocks: dict[int, bool], *,
              kind: str = WindowKind.AUDIT) -> BlockScan:
    """A finished scan (or audit) of `stream_id` that previewed `blocks` (number -> matched) at `at`."""
    stream, _ = Stream.objects.get_or_create(source=source, stream_id=stream_id)
    window = OutageWindow.objects.create(stream=stream, kind=kind, label="audit", start=at - timedelta(days=1),
                                         end=at - timedelta(hours=1))
    scan = BlockScan.objects.create(window=window, source=source, stream_id=stream_id, state=ScanState.DONE,
                                    requested_by_name="completeness audit", planned=len(blocks))
    for number, matched in blocks.items():
        PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=number, matched=matched,
                                      records=2 if matched else 0, previewed_at=at)
    return scan


def test_it_holds_for_matched_blocks_without_a_delivery_and_clears_when_one_is_stored() -> None:
    now = fixed_now()
    source = make_source()
    store(source, record(now - timedelta(hours=3), block=100), record(now - timedelta(hours=3), block=1,
                                                                      stream_id=OTHER_STREAM, tag="payouts"))
    scan = previewed(source, STREAM, now - timedelta(minutes=30), {100: True, 101: True, 102: False, 103: True})
    # The same block found again by a scan of a marked window: counted once.
    previewed(source, STREAM, now - timedelta(minutes=20), {103: True}, kind=WindowKind.MARKED)
    rule = make_rule("Missing blocks", condition=Condition.MISSING_BLOCKS, window_minutes=1440)
    [seen] = conditions.observe(rule, now)
    assert (seen.target_kind, seen.target_key, seen.label, seen.failures) == (TargetKind.STREAM, STREAM, "orders", 2)
    assert [b["block_number"] for b in seen.extra["missing_blocks"]] == [101, 103]
    assert seen.extra["window_ids"][0] == scan.window_id and len(seen.extra["window_ids"]) == 2
    details = conditions.describe(rule, seen, now)
    assert details["error_groups"] == []
    assert conditions.headline(rule, seen, details) == (
        "stream orders: 2 blocks it matched with no delivery stored, e.g. block 101 on Ethereum (found by a "
        "completeness audit or a block scan)")
    assert rule.describe_condition().startswith("blocks a completeness audit or a block scan previewed in the last "
                                                "1440 min")
    # Another scope, or a window the findings are older than: nothing.
    rule.scope, rule.scope_value = Scope.TAG, "payouts"
    assert conditions.observe(rule, now) == []
    rule.scope, rule.scope_value, rule.window_minutes = Scope.STREAM, STREAM, 10
    assert conditions.observe(rule, now) == []
    rule.window_minutes = 1440
    # Re-sent and polled: a delivery of each block stored, whatever its date or status.
    store(source, record(now, block=101), record(now, block=103, error="connect ECONNREFUSED", retries=1))
    assert conditions.observe(rule, now) == []


def test_the_mail_names_the_missing_blocks_with_the_page_to_resend_them_from() -> None:
    now = fixed_now()
    source = make_source()
    store(source, record(now - timedelta(hours=3), block=100))
    scan = previewed(source, STREAM, now - timedelta(minutes=30), {101: True, 102: False})
    make_rule("Missing blocks", condition=Condition.MISSING_BLOCKS, window_minutes=1440)
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    [mail] = outbox.outbox
    assert mail.subject.startswith("[MISSING BLOCKS] stream orders: 1 block it matched with no delivery stored")
    body = mail.body
    assert "Condition: 1 block the stream matched with no delivery stored" in body
    assert f"  block 101 on chain 0x1: {settings.SITE_URL.rstrip('/')}/windows/{scan.window_id}/\n" in body
    html = mail.alternatives[0][0]  # type: ignore[attr-defined]
    assert f"/windows/{scan.window_id}/\">block 101</a> on chain 0x1" in html


def test_the_rule_form_asks_a_window_of_a_day_at_least() -> None:
    data = {"name": "Missing blocks", "enabled": True, "scope": Scope.ALL, "condition": Condition.MISSING_BLOCKS,
            "window_minutes": 15, "threshold_percent": 50, "min_deliveries": 10, "latency_seconds": 60,
            "quiet_probability": 0.001, "consecutive_failures": 5, "stale_minutes": 10, "grace_minutes": 10,
            "cooldown_minutes": 30, "digest": "off"}
    form = AlertRuleForm(data)
    assert not form.is_valid() and "at least 1440 minutes (a day)" in form.errors["window_minutes"][0]
    assert AlertRuleForm({**data, "window_minutes": 1500}).is_valid()
