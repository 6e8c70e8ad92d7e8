"""Missing blocks, found, recovered and verified, against the simulator over HTTP: the stream status history and
its windows, a window's blocks found by previews (each once, within the budget, through a 429 and a dead worker),
re-sent once each, and the window's verification."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from dashboard.actions import block_scan, services
from dashboard.actions.models import ActionState, BlockScan, ItemState, PreviewedBlock, ScanState
from dashboard.deliveries import completeness
from dashboard.deliveries.models import OutageWindow, Stream, StreamStatusChange, WindowKind
from tests.actions.completeness_world import PreviewCounter, World
from tests.conftest import make_user


@pytest.fixture
def staff(db: None) -> User:
    return make_user("operator", role="Staff")


def scan_of(world: World, staff: User, window: OutageWindow) -> BlockScan:
    world.settle(window.end)
    scan = block_scan.prepare_scan(staff, window, now=world.now)
    assert block_scan.confirm_scan(scan, queue=lambda pk: None)
    return scan


def reload_window(world: World) -> tuple[Any, OutageWindow]:
    swaps, begins, ends = world.reload()
    stream = world.stream("uniswap-v2-swaps")
    window = completeness.mark_window(stream, begins, ends, "address reload", "operator", now=world.now)
    return swaps, window


def test_the_sync_keeps_each_status_seen_and_derives_the_outage_windows(world: World) -> None:
    treasury = world.stream("treasury-wallets")
    [first] = StreamStatusChange.objects.filter(stream=treasury)
    assert (first.previous, first.status) == ("", "error") and first.since < first.seen_at
    [window] = OutageWindow.objects.filter(stream=treasury)
    # Dated by the provider's isErrorSince, open while the status holds.
    assert window.kind == WindowKind.PROVIDER_STATUS and window.start == first.since and window.end is None
    # A sync that sees nothing new writes nothing.
    world.sync()
    assert StreamStatusChange.objects.filter(stream=treasury).count() == 1
    # Reactivated: the window closes at the sync that saw it active.
    sim_stream = world.sim.world.streams.stream(treasury.stream_id)
    world.sim.world.streams.set_status(sim_stream, "active", world.sim.world.clock.timestamp())
    world.sim.world.clock.advance(60)
    world.sync()
    window.refresh_from_db()
    assert window.end == world.now
    assert list(StreamStatusChange.objects.filter(stream=treasury).values_list("status", flat=True)) == [
        "error", "active"]
    # An active stream has no window; one paused by its owner has one from the last sync that saw it active.
    usdc = world.stream("usdc-transfers")
    assert not OutageWindow.objects.filter(stream=usdc).exists()
    seen_active = Stream.objects.get(pk=usdc.pk).provider_seen_at
    world.sim.world.streams.set_status(world.sim.world.streams.stream(usdc.stream_id), "paused",
                                       world.sim.world.clock.timestamp())
    world.sim.world.clock.advance(60)
    world.sync()
    [paused] = OutageWindow.objects.filter(stream=usdc)
    assert paused.start == seen_active and paused.end is None and paused.label == "paused"


def test_the_missing_blocks_found_are_exactly_the_dropped_ones_each_previewed_once(
    world: World, staff: User, previews: PreviewCounter
) -> None:
    swaps, window = reload_window(world)
    scan = scan_of(world, staff, window)
    [chain] = scan.chains.all()
    assert chain.chain_id == "0x1" and scan.planned == chain.blocks
    started = time.monotonic()
    outcome = block_scan.run_scan(scan.pk)
    elapsed = time.monotonic() - started
    scan.refresh_from_db()
    assert outcome.finished and scan.state == ScanState.DONE and scan.previewed == scan.planned
    found = {m.block_number for m in block_scan.missing_blocks(scan)}
    truth = world.missed(swaps, "0x1", chain.first_block, chain.last_block)
    assert found == truth and len(truth) >= 3
    # Every block of the range once, at the simulator.
    assert previews.seen == {("0x1", n): 1 for n in range(chain.first_block, chain.last_block + 1)}
    assert elapsed < 10


def test_a_worker_that_dies_mid_scan_resumes_without_previewing_a_block_twice(
    world: World, staff: User, previews: PreviewCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    swaps, window = reload_window(world)
    scan = scan_of(world, staff, window)
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
        block_scan.run_scan(scan.pk)
    scan.refresh_from_db()
    assert scan.previewed == 4 and scan.state == ScanState.RUNNING
    monkeypatch.setattr(block_scan, "preview_block", real)
    assert block_scan.run_scan(scan.pk).finished
    scan.refresh_from_db()
    [chain] = scan.chains.all()
    assert scan.state == ScanState.DONE and scan.previewed == chain.blocks
    assert set(previews.seen.values()) == {1} and len(previews.seen) == chain.blocks
    assert PreviewedBlock.objects.filter(scan=scan).count() == chain.blocks
    assert {m.block_number for m in block_scan.missing_blocks(scan)} == world.missed(
        swaps, "0x1", chain.first_block, chain.last_block)


def test_a_429_brings_the_scan_back_after_its_retry_after_and_the_day_budget_holds(
    world: World, staff: User, previews: PreviewCounter, settings: Any
) -> None:
    _, window = reload_window(world)
    scan = scan_of(world, staff, window)
    faults = world.sim.world.faults
    faults.rate_429, faults.retry_after = 1.0, 7
    outcome = block_scan.run_scan(scan.pk)
    scan.refresh_from_db()
    assert not outcome.finished and outcome.retry_in == 7
    assert scan.state == ScanState.WAITING and "429" in scan.message and scan.previewed == 0
    faults.rate_429 = 0.0
    # The day's budget: a few previews left, then the scan waits for tomorrow.
    settings.BLOCK_PREVIEW_PER_DAY = PreviewedBlock.objects.count() + 3
    outcome = block_scan.run_scan(scan.pk)
    scan.refresh_from_db()
    assert not outcome.finished and outcome.retry_in > 0 and scan.previewed == 3
    assert scan.state == ScanState.WAITING and "BLOCK_PREVIEW_PER_DAY" in scan.message
    assert block_scan.budget_left() == 0
    settings.BLOCK_PREVIEW_PER_DAY = 50_000
    assert block_scan.run_scan(scan.pk).finished
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE and set(previews.seen.values()) == {1}


def test_a_cancelled_scan_stops_and_keeps_what_it_found(world: World, staff: User) -> None:
    _, window = reload_window(world)
    scan = scan_of(world, staff, window)
    block_scan.cancel_scan(scan)
    assert scan.state == ScanState.CANCELLED
    assert block_scan.run_scan(scan.pk).finished and not PreviewedBlock.objects.filter(scan=scan).exists()


def test_bad_windows_are_refused_with_a_message(world: World, staff: User, settings: Any) -> None:
    stream = world.stream("uniswap-v2-swaps")
    now = world.now
    with pytest.raises(completeness.WindowRefused, match="future"):
        completeness.mark_window(stream, now - timedelta(minutes=5), now + timedelta(hours=1), "", "x", now=now)
    with pytest.raises(completeness.WindowRefused, match="more than 100,000"):
        # Ten million blocks of a 12-second chain: about four years.
        completeness.mark_window(stream, now - timedelta(days=4 * 365), now - timedelta(hours=1), "", "x", now=now)
    with pytest.raises(completeness.WindowRefused, match="end after it starts"):
        completeness.mark_window(stream, now - timedelta(hours=1), now - timedelta(hours=2), "", "x", now=now)
    aptos = world.stream("usdc-transfers")
    Stream.objects.filter(pk=aptos.pk).update(provider_kind="aptos")
    aptos.refresh_from_db()
    with pytest.raises(completeness.WindowRefused, match="no block preview for Aptos"):
        completeness.mark_window(aptos, now - timedelta(hours=1), now - timedelta(minutes=30), "", "x", now=now)
    bare = Stream.objects.create(source=world.source, stream_id="0d3c1f7e-0000-4000-8000-000000000001")
    with pytest.raises(completeness.WindowRefused, match="chains are not known"):
        completeness.mark_window(bare, now - timedelta(hours=1), now - timedelta(minutes=30), "", "x", now=now)
    # A window that ended less than SETTLE before the last poll: its last blocks' deliveries may not be stored yet,
    # and a block called missing then re-sent would be delivered twice.
    _, window = reload_window(world)
    assert window.end is not None and window.end > world.now - block_scan.SETTLE
    with pytest.raises(completeness.WindowRefused, match="too recent: its blocks' deliveries may not be polled yet"):
        block_scan.prepare_scan(staff, window, now=world.now)
    # More previews than one scan may spend.
    world.settle(window.end)
    settings.BLOCK_PREVIEW_PER_REQUEST = 5
    with pytest.raises(completeness.WindowRefused, match="BLOCK_PREVIEW_PER_REQUEST"):
        block_scan.prepare_scan(staff, window, now=world.now)


def test_missing_blocks_are_resent_once_each_and_the_window_reads_recovered(
    world: World, staff: User, settings: Any
) -> None:
    swaps, window = reload_window(world)
    scan = scan_of(world, staff, window)
    block_scan.run_scan(scan.pk)
    missing = block_scan.missing_blocks(scan)
    action = services.prepare_resend_blocks(staff, scan, [(m.chain_id, m.block_number) for m in missing])
    assert action.target_count == len(missing) and f"Re-send {len(missing)} missing blocks" in action.scope
    assert services.confirm(action, queue=lambda pk: None)
    assert not services.confirm(action, queue=lambda pk: None)
    world.catch_up()
    services.run_action(action.pk)
    action.refresh_from_db()
    assert action.state == ActionState.DONE
    assert set(action.items.values_list("state", flat=True)) == {ItemState.REPLAYED}
    # Once each: the simulator made one delivery per block; asking again finds nothing left to re-send.
    resent = world.sim.world.streams._resends
    assert {n for (_, n), count in resent.items() if count} == {m.block_number for m in missing}
    assert set(resent.values()) == {1}
    with pytest.raises(services.ActionRefused, match="No missing block is left"):
        services.prepare_resend_blocks(staff, scan, [(m.chain_id, m.block_number) for m in missing])
    # Before the next poll nothing is verified; after it, every block is back.
    before = block_scan.recovery(scan)
    assert before is not None and before.recovered == 0 and len(before.still_missing) == len(missing)
    world.poll()
    after = block_scan.recovery(scan)
    assert after is not None and after.complete and after.recovered == after.asked == len(missing)
    assert block_scan.missing_blocks(scan) == []


def test_a_lost_answer_is_read_again_from_history_never_resent(
    world: World, staff: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.upstream import errors

    _, window = reload_window(world)
    scan = scan_of(world, staff, window)
    block_scan.run_scan(scan.pk)
    missing = block_scan.missing_blocks(scan)[:2]
    action = services.prepare_resend_blocks(staff, scan, [(m.chain_id, m.block_number) for m in missing])
    services.confirm(action, queue=lambda pk: None)
    world.catch_up()
    real = services.resend_block

    def answer_lost(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise errors.OutcomeUnknown("the connection dropped after the request was sent")

    monkeypatch.setattr(services, "resend_block", answer_lost)
    services.run_action(action.pk)
    items = list(action.items.order_by("id"))
    assert [i.state for i in items] == [ItemState.REPLAYED] * 2
    assert all("/history shows the block's delivery" in i.answer for i in items)
    assert set(world.sim.world.streams._resends.values()) == {1}


def test_an_hour_of_a_two_second_chain_costs_one_preview_per_block_at_the_upstreams_pace(
    world: World, staff: User, previews: PreviewCounter
) -> None:
    treasury = world.stream("treasury-wallets")
    now = world.now
    window = completeness.mark_window(treasury, now - timedelta(hours=3), now - timedelta(hours=2), "an hour in error",
                                      "operator", now=now)
    scan = scan_of(world, staff, window)
    [chain] = scan.chains.all()
    # Polygon makes a block every 2.1 s: 1,715 blocks an hour, and one more on each side.
    assert chain.chain_id == "0x89" and 1714 <= chain.blocks <= 1720
    started = time.monotonic()
    assert block_scan.run_scan(scan.pk).finished
    elapsed = time.monotonic() - started
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE and scan.previewed == chain.blocks
    assert len(previews.seen) == chain.blocks and set(previews.seen.values()) == {1}
    sim_stream = world.sim.world.streams.stream(treasury.stream_id)
    assert {m.block_number for m in block_scan.missing_blocks(scan)} == world.missed(
        sim_stream, "0x89", chain.first_block, chain.last_block)
    print(f"\n{chain.blocks} previews in {elapsed:.1f} s: {chain.blocks / elapsed:.0f} previews/s")


@pytest.mark.django_db(transaction=True)
def test_runs_at_once_share_one_days_budget(settings: Any) -> None:
    import threading

    from django.db import connection
    from django.utils import timezone

    settings.BLOCK_PREVIEW_PER_DAY = 50
    now = timezone.now()
    granted: list[int] = []

    def take() -> None:
        got = 0
        while n := block_scan.take_previews(3, now):
            got += n
        granted.append(got)
        connection.close()

    runs = [threading.Thread(target=take) for _ in range(4)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert sum(granted) == 50 and len(granted) == 4
    assert block_scan.budget_left(now) == 0
    # What a run took and never asked goes back; the next day starts afresh.
    block_scan.give_back_previews(5, now)
    assert block_scan.budget_left(now) == 5
    assert block_scan.budget_left(now + timedelta(days=1)) == 50


def test_a_block_previewed_for_the_stream_before_is_not_asked_again(
    world: World, staff: User, previews: PreviewCounter
) -> None:
    swaps, window = reload_window(world)
    first = scan_of(world, staff, window)
    block_scan.run_scan(first.pk)
    found = {(m.chain_id, m.block_number) for m in block_scan.missing_blocks(first)}
    asked = dict(previews.seen)
    # A second search of the same window (or of one overlapping an audit's sample): the earlier answers stand.
    second = scan_of(world, staff, window)
    outcome = block_scan.run_scan(second.pk)
    second.refresh_from_db()
    assert outcome.finished and second.state == ScanState.DONE and second.previewed == second.planned
    assert previews.seen == asked and set(asked.values()) == {1}
    assert {(m.chain_id, m.block_number) for m in block_scan.missing_blocks(second)} == found
