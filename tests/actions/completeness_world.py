"""A simulator whose scenario starts now (so what the dashboard dates with its own clock and what the simulator dates
agree), its history polled and its streams synced: the world the completeness tests find, re-send and verify in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dashboard.actions import block_scan
from dashboard.deliveries.models import Stream
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll
from dashboard.simulator import catalog, truth
from dashboard.sources.models import Source
from tests.factories import source_for


@dataclass
class World:
    sim: Any
    source: Source

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.sim.world.clock.timestamp(), UTC)

    def poll(self) -> None:
        for _ in range(20):
            result = poll(self.source)
            self.source.refresh_from_db()
            if result.complete and self.source.synced_through is not None:
                break

    def sync(self) -> None:
        sync_streams(self.source, now=self.now)

    def stream(self, tag: str) -> Stream:
        return Stream.objects.get(source=self.source, tag=tag)

    def catch_up(self) -> None:
        """Move the simulator's clock past the real one, so what it makes now is dated after what we sent."""
        ahead = datetime.now(UTC).timestamp() + 1 - self.sim.world.clock.timestamp()
        if ahead > 0:
            self.sim.world.clock.advance(ahead)

    def settle(self, end: datetime | None) -> None:
        """Move the simulator's clock SETTLE and a minute and a half past `end` (a window's) and poll: the records of
        the window's last blocks are then stored and newer ones too (the poll's synced-through point is its newest
        record), so a scan may call a block missing."""
        if end is None:
            return
        ahead = (end + block_scan.SETTLE).timestamp() + 90 - self.sim.world.clock.timestamp()
        if ahead > 0:
            self.sim.world.clock.advance(ahead)
        self.poll()

    def reload(self) -> tuple[Any, datetime, datetime]:
        [(swaps, begins, ends)] = truth.reloads(self.sim.world)
        return swaps, datetime.fromtimestamp(begins, UTC), datetime.fromtimestamp(ends, UTC)

    def missed(self, sim_stream: Any, chain_hex: str, first: int, last: int) -> set[int]:
        """The blocks from `first` to `last` that the stream matched and received no delivery of (the truth)."""
        chain = catalog.CHAINS_BY_HEX[chain_hex]
        blocks = truth.matching_blocks(self.sim.world, catalog.block_time(chain, first),
                                       catalog.block_time(chain, last), stream=sim_stream)
        return {b.number for b in blocks if b.missed and b.chain_id == chain_hex}


def make_world(make_simulator: Callable[..., Any]) -> World:
    start = datetime.now(UTC).replace(microsecond=0)
    sim = make_simulator(start=start, history_window_days=1)
    made = World(sim, source_for(sim))
    made.poll()
    made.sync()
    return made


class PreviewCounter(logging.Handler):
    """The block previews the simulator served, counted from its request log: (chain, block) -> requests."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, int], int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 4 and args[1] == "POST" and "/block/" in str(args[2]):
            parts = str(args[2]).split("?")[0].strip("/").split("/")
            if args[3] == 200:
                key = (parts[2], int(parts[4]))
                self.seen[key] = self.seen.get(key, 0) + 1


@contextmanager
def counting_previews() -> Iterator[PreviewCounter]:
    counter = PreviewCounter()
    logger = logging.getLogger("dashboard.simulator")
    level = logger.level
    logger.addHandler(counter)
    logger.setLevel(logging.INFO)
    try:
        yield counter
    finally:
        logger.removeHandler(counter)
        logger.setLevel(level)
