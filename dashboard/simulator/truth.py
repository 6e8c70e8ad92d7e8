"""The truth about completeness, read off a simulator in-process (nothing here is served over HTTP).

For each block a stream matched: its deliveries and what became of each — recorded in `/history`, not made
because the stream was not `active` (contract §5), missed by an address reload, or not due yet — and the
scripted windows behind them (quiet hours, reloads, slow periods). Tests, and a completeness check's tests,
compare what a client concludes from `/history` and the block preview with these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashboard.simulator.history import Delivery, Stream
    from dashboard.simulator.world import World

RECORDED = "recorded"
NOT_ACTIVE = "not active"
RELOAD = "address reload"
PENDING = "pending"


@dataclass(frozen=True)
class DeliveryTruth:
    id: str
    confirmed: bool
    # When its first attempt was (or would have been) made.
    date: float
    # The block's moment, or its finality's when confirmed: what the delivery waited for.
    due: float
    fate: str

    @property
    def latency(self) -> float:
        """Seconds from its due moment to its first attempt: 1-5 s, minutes in a slow period."""
        return self.date - self.due


@dataclass(frozen=True)
class BlockTruth:
    stream_id: str
    tag: str
    chain_id: str
    number: int
    mined_at: float
    deliveries: tuple[DeliveryTruth, ...]

    @property
    def recorded(self) -> bool:
        """At least one of its deliveries is in `/history`."""
        return any(d.fate == RECORDED for d in self.deliveries)

    @property
    def missed(self) -> bool:
        """None of its deliveries was made (nor is still due): only a re-send brings it back."""
        return all(d.fate in (NOT_ACTIVE, RELOAD) for d in self.deliveries)


def matching_blocks(world: World, since: float, until: float, *, stream: Stream | None = None) -> list[BlockTruth]:
    """Every block mined in [since, until] that a stream (or `stream`) matched, oldest first, with the fate of
    its deliveries as the history stands at the clock's now. Requests made through the API (a re-send) add
    deliveries of their own; they are not listed here."""
    now = world.clock.timestamp()
    history = world.history
    # The ledger walks up to now first, so that what it left out is known.
    history.window(now)
    by_block: dict[tuple[str, int], list[Delivery]] = {}
    for d in history.matching_between(since, until):
        if stream is None or d.event.stream.id == stream.id:
            by_block.setdefault((d.event.stream.id, d.event.number), []).append(d)
    out = []
    for deliveries in by_block.values():
        event = deliveries[0].event
        out.append(
            BlockTruth(
                stream_id=event.stream.id,
                tag=event.stream.tag,
                chain_id=event.stream.chain.hex_id,
                number=event.number,
                mined_at=event.ts,
                deliveries=tuple(
                    DeliveryTruth(
                        d.id,
                        d.confirmed,
                        d.date,
                        event.ts + (event.stream.chain.confirm_seconds if d.confirmed else 0.0),
                        _fate(world, d, now),
                    )
                    for d in sorted(deliveries, key=lambda d: (d.date, d.id))
                ),
            )
        )
    return sorted(out, key=lambda b: (b.mined_at, b.stream_id))


def _fate(world: World, d: Delivery, now: float) -> str:
    if world.history.reloading(d.event):
        return RELOAD
    if d.date > now:
        return PENDING
    if world.history.was_dropped(d.id):
        return NOT_ACTIVE
    return RECORDED


def quiet_hours(world: World, stream: Stream, since: float, until: float) -> list[tuple[float, float]]:
    """When `stream`'s contract emitted nothing (not an outage: the preview answers null then)."""
    return world.history.quiet_hours(stream, since, until)


def reloads(world: World) -> list[tuple[Stream, float, float]]:
    """The scripted address reloads: (stream, start, end); its blocks mined then were missed."""
    return world.history.reloads()


def slow_periods(world: World) -> list[tuple[Stream, float, float]]:
    """The scripted slow periods: (stream, start, end); its deliveries due then went out minutes late."""
    return world.history.slow_periods()
