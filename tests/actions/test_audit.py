"""The completeness audit against the simulator over HTTP: a sample of final blocks previewed per stream and day,
which finds the blocks an address reload dropped while the stream stayed active (silent loss), opens an incident
through a `missing_blocks` rule that resolves once they are re-sent and polled; within the day's preview budget,
each block previewed once per stream (through a dead worker and a 429), maintenance and outage windows left out,
Aptos and chainless streams skipped with a reason."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard.actions import audit, block_scan, services
from dashboard.actions.models import BlockScan, PreviewedBlock, ScanState
from dashboard.actions.tasks import audit_completeness_task
from dashboard.alerts import conditions, evaluate
from dashboard.alerts.models import AlertRule, Condition, Incident
from dashboard.deliveries import completeness
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.expectations.models import MaintenanceWindow
from dashboard.simulator import catalog
from tests.actions.completeness_world import PreviewCounter, World

SWAPS = "uniswap-v2-swaps"


def settle(world: World) -> None:
    """Ten minutes on, polled: the reload (over four minutes before the scenario's start) is then final (Ethereum:
    144 s) and settled (5 min) before now and before the last poll."""
    world.sim.world.clock.advance(600)
    world.poll()


def audit_of(world: World, begins: datetime, ends: datetime, *, blocks: int, settings: Any,
             seed: int = 1) -> BlockScan:
    """The swaps stream's audit of [begins, ends), sampling up to `blocks` blocks."""
    settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = blocks
    world.source.refresh_from_db()
    polled = max(m for m in (world.source.synced_through, world.source.last_success_at) if m is not None)
    if polled - timedelta(minutes=5, seconds=144) < ends:
        settle(world)
    run = audit.plan_audits(world.now, queue=lambda pk: None, rng=random.Random(seed),
                            period=(begins, ends), stream_ids=[world.stream(SWAPS).stream_id])
    assert run.skipped == {}, run.skipped
    [pk] = run.queued
    return BlockScan.objects.get(pk=pk)


def sampled(scan: BlockScan) -> list[int]:
    [chain] = scan.chains.all()
    return list(chain.sample)


def test_the_audit_finds_the_dropped_blocks_and_the_rule_opens_then_resolves_once_they_are_resent(
    world: World, staff: User, previews: PreviewCounter, settings: Any
) -> None:
    swaps, begins, ends = world.reload()
    scan = audit_of(world, begins - timedelta(minutes=1), ends + timedelta(minutes=1), blocks=1000, settings=settings)
    assert scan.window.kind == WindowKind.AUDIT and scan.state == ScanState.QUEUED
    assert scan.requested_by is None and scan.requested_by_name == audit.AUDIT_BY
    blocks = sampled(scan)
    assert scan.planned == len(blocks) and blocks == sorted(set(blocks))
    assert block_scan.run_scan(scan.pk).finished
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE and scan.previewed == scan.planned
    # Every block of the stretch sampled (a budget bigger than it): what it finds is exactly what the reload dropped.
    truth = world.missed(swaps, "0x1", blocks[0], blocks[-1])
    found = {m.block_number for m in block_scan.missing_blocks(scan)}
    assert found == truth and len(truth) >= 3
    assert previews.seen == {("0x1", n): 1 for n in blocks}

    rule = AlertRule.objects.create(name="Missing blocks", condition=Condition.MISSING_BLOCKS, window_minutes=1440,
                                    grace_minutes=0, cooldown_minutes=0, recipients="ops@example.com")
    now = timezone.now()
    [seen] = conditions.observe(rule, now)
    stream = world.stream(SWAPS)
    assert seen.target_key == stream.stream_id and seen.failures == len(truth)
    assert seen.extra["window_ids"] == [scan.window_id]
    evaluate.evaluate_all(now)
    incident = Incident.objects.get(rule=rule)
    assert incident.is_open and incident.stream_id == stream.stream_id
    first = min(truth)
    assert incident.summary == (f"stream {SWAPS}: {len(truth)} blocks it matched with no delivery stored, e.g. block "
                                f"{first} on Ethereum (found by a completeness audit or a block scan)")

    # Re-sent from the audit's window like a scan's, then polled: the window reads recovered, the incident resolves.
    missing = block_scan.missing_blocks(scan)
    action = services.prepare_resend_blocks(staff, scan, [(m.chain_id, m.block_number) for m in missing])
    assert services.confirm(action, queue=lambda pk: None)
    world.catch_up()
    services.run_action(action.pk)
    assert conditions.observe(rule, timezone.now()) != []  # re-sent, not polled yet
    world.poll()
    recovered = block_scan.recovery(scan)
    assert recovered is not None and recovered.complete and recovered.recovered == len(truth)
    assert conditions.observe(rule, timezone.now()) == []
    # Clear at one evaluation, resolved at the next (the rule's grace: none).
    evaluate.evaluate_all(timezone.now())
    evaluate.evaluate_all(timezone.now())
    incident.refresh_from_db()
    assert not incident.is_open


def test_the_day_budget_holds_the_audit_stops_for_the_day_and_says_so(
    world: World, previews: PreviewCounter, settings: Any
) -> None:
    swaps, begins, ends = world.reload()
    scan = audit_of(world, begins - timedelta(minutes=5), ends, blocks=10, settings=settings)
    settings.BLOCK_PREVIEW_PER_DAY = PreviewedBlock.objects.count() + 3
    assert block_scan.run_scan(scan.pk).finished
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE and scan.previewed == 3 and scan.planned == 10
    assert "Stopped: today's preview budget (BLOCK_PREVIEW_PER_DAY" in scan.message
    assert block_scan.budget_left() == 0 and len(previews.seen) == 3
    # Nothing more is previewed, and no new audit is made while the budget is spent: the planner says why.
    assert block_scan.run_scan(scan.pk).finished and len(previews.seen) == 3
    run = audit.plan_audits(world.now, queue=lambda pk: None, period=(ends, ends + timedelta(minutes=1)))
    assert run.queued == [] and all("BLOCK_PREVIEW_PER_DAY" in why for why in run.skipped.values())
    assert run.skipped and not OutageWindow.objects.filter(kind=WindowKind.AUDIT, start=ends).exists()


def test_no_block_is_previewed_twice_for_a_stream_through_a_dead_worker_a_429_and_a_second_audit(
    world: World, previews: PreviewCounter, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    swaps, begins, ends = world.reload()
    start = begins - timedelta(minutes=20)
    first = audit_of(world, start, ends, blocks=30, settings=settings)
    real = block_scan.preview_block
    calls = {"n": 0}

    class Killed(BaseException):
        pass

    def dies_after_four(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 4:
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(block_scan, "preview_block", dies_after_four)
    with pytest.raises(Killed):
        block_scan.run_scan(first.pk)
    monkeypatch.setattr(block_scan, "preview_block", real)
    first.refresh_from_db()
    assert first.previewed == 4 and first.state == ScanState.RUNNING
    # The provider asks to slow down: the audit comes back after its Retry-After and goes on.
    faults = world.sim.world.faults
    faults.rate_429, faults.retry_after = 1.0, 7
    outcome = block_scan.run_scan(first.pk)
    assert not outcome.finished and outcome.retry_in == 7
    faults.rate_429 = 0.0
    assert block_scan.run_scan(first.pk).finished
    first.refresh_from_db()
    assert first.state == ScanState.DONE and first.previewed == 30
    # A second audit over the same stretch (another day's start) samples only blocks not previewed yet.
    second = audit_of(world, start + timedelta(seconds=1), ends, blocks=1000, settings=settings, seed=2)
    assert not set(sampled(first)) & set(sampled(second))
    assert block_scan.run_scan(second.pk).finished
    assert set(previews.seen.values()) == {1}
    assert len(previews.seen) == 30 + len(sampled(second))
    # Planning again for the same day makes nothing new (one audit per stream and day).
    again = audit.plan_audits(world.now, queue=lambda pk: None, period=(start, ends),
                              stream_ids=[world.stream(SWAPS).stream_id])
    assert again.queued == [] and again.skipped == {}


def test_maintenance_and_outage_windows_are_left_out_of_the_sample(world: World, settings: Any) -> None:
    swaps, begins, ends = world.reload()
    stream = world.stream(SWAPS)
    start = begins - timedelta(minutes=30)
    maintenance = MaintenanceWindow.objects.create(
        name="node upgrade", scope="stream", scope_value=stream.stream_id,
        starts_at=start + timedelta(minutes=5), ends_at=start + timedelta(minutes=15))
    marked = completeness.mark_window(stream, begins, ends, "address reload", "operator", now=world.now)
    scan = audit_of(world, start, ends + timedelta(minutes=1), blocks=1000, settings=settings)
    chain = catalog.CHAINS_BY_HEX["0x1"]
    times = [datetime.fromtimestamp(catalog.block_time(chain, n), tz=begins.tzinfo) for n in sampled(scan)]
    assert times and all(start <= t < ends + timedelta(minutes=1) for t in times)
    for left_out in ((maintenance.starts_at, maintenance.ends_at), (marked.start, marked.end)):
        assert not [t for t in times if left_out[0] <= t <= left_out[1]], left_out
    # The rest of the stretch is sampled whole (the budget covers it): blocks before, between and after.
    assert any(t < maintenance.starts_at for t in times) and any(t > ends for t in times)
    assert any(maintenance.ends_at < t < begins for t in times)


def test_aptos_chainless_and_inactive_streams_are_skipped_with_a_reason_and_0_turns_it_off(
    world: World, settings: Any
) -> None:
    settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = 6
    swaps = world.stream(SWAPS)
    # A stretch whose last blocks are not final and polled yet is audited later, whole.
    now = world.now
    run = audit.plan_audits(now, queue=lambda pk: None, period=(now - timedelta(hours=1), now - timedelta(minutes=6)),
                            stream_ids=[swaps.stream_id])
    assert run.queued == [] and "not final and polled yet (the slowest finality of the stream's chains, 144 s, " \
        "plus 5 min, before the last poll)" in run.skipped[swaps.stream_id]
    # So is one final long ago whose deliveries no poll has stored yet (the poller was down): not missing.
    source = type(world.source).objects.filter(pk=world.source.pk)
    polled = source.values_list("synced_through", "last_success_at").get()
    source.update(synced_through=now - timedelta(hours=2), last_success_at=now - timedelta(hours=2))
    period = (now - timedelta(hours=2), now - timedelta(minutes=90))
    run = audit.plan_audits(now, queue=lambda pk: None, period=period, stream_ids=[swaps.stream_id])
    assert run.queued == [] and "before the last poll" in run.skipped[swaps.stream_id]
    source.update(synced_through=polled[0], last_success_at=polled[1])
    Stream.objects.filter(pk=swaps.pk).update(provider_kind="aptos")
    bare = Stream.objects.create(source=world.source, stream_id="0d3c1f7e-0000-4000-8000-000000000001",
                                 provider_status="active")
    _, begins, ends = world.reload()
    run = audit.plan_audits(world.now, queue=lambda pk: None, period=(begins - timedelta(hours=1), ends),
                            stream_ids=[swaps.stream_id, bare.stream_id])
    assert run.queued == []
    assert "no block preview for Aptos" in run.skipped[swaps.stream_id]
    assert "chains are not known" in run.skipped[bare.stream_id]
    assert not OutageWindow.objects.filter(kind=WindowKind.AUDIT).exists()
    swaps.refresh_from_db()
    assert "no block preview for Aptos" in audit.skip_reason(swaps)
    treasury = world.stream("treasury-wallets")
    assert treasury.provider_status == "error" and "while the provider has it error" in audit.skip_reason(treasury)
    settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = 0
    assert "is off" in audit.skip_reason(world.stream("usdc-transfers"))
    assert audit.plan_audits(world.now, queue=lambda pk: None) == audit.AuditRun()


def test_the_beat_task_audits_each_active_stream_once_a_day_within_its_sample(
    world: World, eager_tasks: None, previews: PreviewCounter, settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = 4
    # Each audit's scan is queued when its rows are committed, and run (eagerly) under its lease.
    with django_capture_on_commit_callbacks(execute=True):
        audit_completeness_task()
    scans = list(BlockScan.objects.filter(window__kind=WindowKind.AUDIT))
    day = audit.audited_day(timezone.now())
    active = set(Stream.objects.active_at_provider().values_list("stream_id", flat=True))
    assert scans and {s.stream_id for s in scans} <= active
    for scan in scans:
        assert (scan.window.start, scan.window.end) == day
        assert scan.state == ScanState.DONE and 0 < scan.previewed == scan.planned <= 4
        blocks = list(scan.blocks.values_list("chain_id", "block_number"))
        assert len(blocks) == len(set(blocks)) == scan.planned
    # Streams on one chain may sample the same block (each once): the provider saw one preview per sampled block.
    assert sum(previews.seen.values()) == sum(s.planned for s in scans)
    audit_completeness_task()
    assert BlockScan.objects.filter(window__kind=WindowKind.AUDIT).count() == len(scans)


def test_the_audits_window_page_lists_what_it_found_and_offers_the_resend_and_the_stream_page_says_why_not(
    world: World, staff_client: Client, settings: Any
) -> None:
    swaps, begins, ends = world.reload()
    scan = audit_of(world, begins - timedelta(minutes=1), ends + timedelta(minutes=1), blocks=1000, settings=settings)
    block_scan.run_scan(scan.pk)
    missing = block_scan.missing_blocks(scan)
    page = staff_client.get(scan.window.get_absolute_url()).content.decode()
    assert "completeness audit of" in page and f"Re-send {len(missing)} blocks" in page
    assert str(missing[0].block_number) in page
    # An audit's window is a sample, not an outage: no scan of the whole day is offered or made.
    refused = staff_client.post(reverse("web:window-scan", args=[scan.window_id]))
    assert refused.status_code == 400 and "mark a window" in refused.content.decode()
    stream = world.stream(SWAPS)
    page = staff_client.get(stream.get_absolute_url()).content.decode()
    # Listed apart from the outage windows (an audit is not one), with what it previewed.
    assert f'class="js-audit">{scan.window.start:%Y-%m-%d} UTC</a>' in page
    assert f"{scan.planned} of {scan.planned}" in page and "No outage window" in page
    assert "Completeness audit:" not in page
    Stream.objects.filter(pk=stream.pk).update(provider_kind="aptos")
    page = staff_client.get(stream.get_absolute_url()).content.decode()
    assert "Completeness audit: Not audited: The provider has no block preview for Aptos streams" in page


def test_the_command_audits_in_the_foreground_and_says_what_it_found_and_skipped(
    world: World, previews: PreviewCounter, settings: Any
) -> None:
    settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = 10
    swaps, treasury = world.stream(SWAPS), world.stream("treasury-wallets")
    out = StringIO()
    # Half an hour before the reload: final, polled, nothing dropped.
    since = (world.now - timedelta(minutes=40)).isoformat()
    until = (world.now - timedelta(minutes=30)).isoformat()
    call_command("audit_completeness", "--stream", swaps.stream_id, "--stream", treasury.stream_id,
                 "--since", since, "--until", until, stdout=out)
    scan = BlockScan.objects.get(stream_id=swaps.stream_id)
    assert scan.state == ScanState.DONE and scan.previewed == scan.planned == 10 and len(previews.seen) == 10
    text = out.getvalue()
    assert f"{treasury.stream_id}: skipped — Not audited while the provider has it error" in text
    assert f"{swaps.stream_id}: Done — 10 blocks previewed; the stream matched something in {scan.matched}; 0 of " \
        f"those have no stored delivery. ({scan.window.get_absolute_url()})" in text
    with pytest.raises(CommandError, match="both --since and --until"):
        call_command("audit_completeness", "--since", since)
