"""The scenario's completeness scripts (contract §5) and the truth tables that describe them: within the demo's
first minutes a latency spike, a quiet stream and an outage with missing blocks; what `/history` holds is
exactly what the truth says was recorded."""

from __future__ import annotations

from datetime import datetime

import httpx

from dashboard.simulator import truth
from dashboard.simulator.config import SimulatorConfig
from dashboard.simulator.server import RunningSimulator
from dashboard.simulator.world import World
from tests.simulator.conftest import START

MINUTE = 60.0
HOUR = 3600.0


def seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_history_holds_exactly_what_the_truth_says_was_recorded(sim: RunningSimulator) -> None:
    world = sim.world
    for advance in (0.0, 30 * MINUTE):
        world.clock.advance(advance)
        now = world.clock.timestamp()
        # Blocks whose deliveries all fall inside the window (the oldest may have had one before it).
        blocks = truth.matching_blocks(world, now - 2 * 24 * HOUR, now)
        told = {d.id for b in blocks for d in b.deliveries if d.fate == truth.RECORDED}
        since = now - 2 * 24 * HOUR + HOUR
        served = {
            r["id"] for r in world.history_records()
            if r["tinyPayload"]["block"] and seconds(r["date"]) >= since
        }
        assert served == {
            d.id for b in blocks for d in b.deliveries if d.fate == truth.RECORDED and d.date >= since
        }
        assert served <= told
        fates = {d.fate for b in blocks for d in b.deliveries}
        assert fates >= {truth.RECORDED, truth.NOT_ACTIVE, truth.RELOAD}


def test_the_first_minutes_show_a_latency_spike(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    start = world.clock.timestamp()
    [(sales, slow_start, slow_end)] = truth.slow_periods(world)
    assert sales.tag == "nft-sales" and slow_start - start == MINUTE and slow_end - start <= 10 * MINUTE
    world.clock.advance(15 * MINUTE)
    blocks = truth.matching_blocks(world, start - 10 * MINUTE, start + 15 * MINUTE, stream=sales)
    late = [d for b in blocks for d in b.deliveries if slow_start <= d.due < slow_end - 20]
    on_time = [d for b in blocks for d in b.deliveries if not slow_start - 10 <= d.due < slow_end]
    assert len(late) >= 8 and all(MINUTE <= d.latency <= 8 * MINUTE for d in late)
    assert max(d.latency for d in late) >= 5 * MINUTE
    assert on_time and all(1.0 <= d.latency <= 5.0 + 0.001 for d in on_time)
    # As `/history` shows it: the record's date minutes after its block.
    records = [r for r in world.history_records(include_payload=True) if r["streamId"] == sales.id]
    waits = [
        seconds(r["date"]) - int(r["payload"]["block"]["timestamp"]) - (sales.chain.confirm_seconds
                                                                          if r["tinyPayload"]["confirmed"] else 0)
        for r in records if r["id"] in {d.id for d in late}
    ]
    assert len(waits) == len(late) and min(waits) >= MINUTE - 1


def test_the_first_minutes_show_a_quiet_stream_that_is_active(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    start = world.clock.timestamp()
    quiet = next(s for s in world.history.streams if s.tag == "bsc-usdt-payments")
    [(begins, ends)] = truth.quiet_hours(world, quiet, start, start)
    assert begins <= start - 45 * MINUTE and ends >= start + 5 * MINUTE
    assert http.get(f"/streams/evm/{quiet.id}").json()["status"] == "active"
    newest = max(seconds(r["date"]) for r in world.history_records() if r["streamId"] == quiet.id)
    assert newest < start - 45 * MINUTE + 10 * MINUTE


def test_the_first_minutes_show_an_outage_with_missing_blocks(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    start = world.clock.timestamp()
    treasury = next(s for s in world.history.streams if s.tag == "treasury-wallets")
    assert http.get(f"/streams/evm/{treasury.id}").json()["status"] == "error"
    missing = [b for b in truth.matching_blocks(world, start - 12 * HOUR, start, stream=treasury) if b.missed]
    assert len(missing) >= 5
    # And the swaps' reload, minutes before the start, with the stream active throughout.
    [(swaps, begins, ends)] = truth.reloads(world)
    assert -10 * MINUTE <= begins - start < ends - start <= 0
    dropped = [b for b in truth.matching_blocks(world, begins, ends, stream=swaps) if b.missed]
    assert dropped and all(d.fate == truth.RELOAD for b in dropped for d in b.deliveries)


def test_the_scripts_are_the_same_for_the_same_seed() -> None:
    def table(seed: int) -> list[tuple[str, int, tuple[str, ...]]]:
        world = World(SimulatorConfig(seed=seed, speed=0, start=START, history_window_days=1))
        now = world.clock.timestamp()
        return [
            (b.tag, b.number, tuple(d.id for d in b.deliveries))
            for b in truth.matching_blocks(world, now - 6 * HOUR, now)
        ]

    assert table(11) == table(11)
    assert table(11) != table(12)
