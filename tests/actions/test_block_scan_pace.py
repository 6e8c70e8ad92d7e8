"""A scan at the provider's pace: several previews in flight, short 429s waited out inside the run, each block
previewed once."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from dashboard.actions import block_scan
from dashboard.actions.models import ScanState
from dashboard.deliveries import completeness
from tests.actions.completeness_world import PreviewCounter, World


def test_a_rate_limited_provider_sets_the_pace_and_each_block_is_previewed_once(
    world: World, staff: User, previews: PreviewCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(block_scan, "PREVIEWS_IN_FLIGHT", 4)
    now = world.now
    window = completeness.mark_window(world.stream("treasury-wallets"), now - timedelta(minutes=130),
                                      now - timedelta(minutes=120), "ten minutes in error", "operator", now=now)
    scan = block_scan.prepare_scan(staff, window, now=now)
    assert block_scan.confirm_scan(scan, queue=lambda pk: None)
    world.sim.world.faults.rate_limit = 40.0
    world.sim.world.faults.latency_ms = 20
    started = time.monotonic()
    # One run: the 429s (a fraction of a second each) are waited out, not re-queued.
    assert block_scan.run_scan(scan.pk).finished
    elapsed = time.monotonic() - started
    scan.refresh_from_db()
    [chain] = scan.chains.all()
    assert scan.state == ScanState.DONE and scan.previewed == chain.blocks
    assert previews.seen == {("0x89", n): 1 for n in range(chain.first_block, chain.last_block + 1)}
    # 40 a second at most (one second's worth at once), and not much slower than that.
    assert (chain.blocks - 40) / 40 - 0.2 <= elapsed <= chain.blocks / 40 * 2 + 1


def test_a_failed_preview_leaves_the_cursor_before_it_and_the_next_run_goes_on(
    world: World, staff: User, previews: PreviewCounter, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr(block_scan, "PREVIEWS_IN_FLIGHT", 4)
    now = world.now
    window = completeness.mark_window(world.stream("treasury-wallets"), now - timedelta(minutes=122),
                                      now - timedelta(minutes=120), "two minutes in error", "operator", now=now)
    scan = block_scan.prepare_scan(staff, window, now=now)
    assert block_scan.confirm_scan(scan, queue=lambda pk: None)
    [chain] = scan.chains.all()
    real = block_scan.preview_block
    failing = chain.first_block + 10

    def provider_away(client: Any, chain_id: str, number: int, config: Any) -> Any:
        if number == failing:
            from dashboard.upstream import errors
            raise errors.ServerError("503 from the provider", status_code=503)
        return real(client, chain_id, number, config)

    monkeypatch.setattr(block_scan, "preview_block", provider_away)
    outcome = block_scan.run_scan(scan.pk)
    scan.refresh_from_db()
    chain.refresh_from_db()
    assert not outcome.finished and scan.state == ScanState.WAITING
    assert scan.previewed == 10 and chain.next_block == failing
    monkeypatch.setattr(block_scan, "preview_block", real)
    assert block_scan.run_scan(scan.pk).finished
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE and scan.previewed == chain.blocks
    # Every block answered; only the ones in flight beside the failed one (at most 3) were asked twice.
    assert set(previews.seen) == {("0x89", n) for n in range(chain.first_block, chain.last_block + 1)}
    assert sum(count - 1 for count in previews.seen.values()) <= 3
