"""The simulator's whole state: clock, fault knobs, and the data behind each operation."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import threading
from datetime import datetime
from typing import Any

from dashboard.simulator.clock import SimClock
from dashboard.simulator.config import FaultConfig, SimulatorConfig
from dashboard.simulator.creators import CreatorsWorld
from dashboard.simulator.cursors import CursorCodec
from dashboard.simulator.history import HistoryWorld
from dashboard.simulator.owners import OwnersWorld
from dashboard.simulator.streams import StreamsWorld


class World:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.api_key = config.api_key
        self.clock = SimClock(config.start, config.speed)
        # A copy, so that tests turning knobs on one running simulator never touch another's config.
        self.faults: FaultConfig = dataclasses.replace(config.faults)
        scenario_start = config.scenario_start.timestamp() if config.scenario_start else self.clock.timestamp()
        self.history = HistoryWorld(
            seed=config.seed,
            start=scenario_start,
            deliveries_per_minute=config.deliveries_per_minute,
            window_days=config.history_window_days,
            streams=config.streams,
            receiver_back_after=config.receiver_back_after,
            sporadic_failure_rate=config.sporadic_failure_rate,
        )
        # The streams were created when the oldest record of the scenario's first window was made.
        self.streams = StreamsWorld(
            self.history, origin=scenario_start - config.history_window_days * 86400.0
        )
        self.owners = OwnersWorld(
            seed=config.seed, sync_delay=config.owners_sync_delay, start=self.clock.timestamp()
        )
        # Mainnet and testnet are separate worlds: the same creator has different tokens on each.
        self.creators = {
            network: CreatorsWorld(seed=config.seed, network=network, start=self.clock.timestamp())
            for network in ("mainnet", "testnet")
        }
        self.cursors = CursorCodec(hashlib.sha256(f"simulator-cursor:{config.seed}".encode()).digest())
        self._fault_rng = random.Random(config.seed)
        self._fault_lock = threading.Lock()
        self.requests_served = 0

    def roll(self) -> float:
        """The next number from the fault dice (seeded, so a sequential test sees the same faults)."""
        with self._fault_lock:
            return self._fault_rng.random()

    def history_records(
        self, now: datetime | None = None, *, include_payload: bool = False
    ) -> list[dict[str, Any]]:
        """The truth: every history record visible at `now` (default: the clock's now), newest first."""
        ts = now.timestamp() if now is not None else self.clock.timestamp()
        return self.history.records(ts, include_payload=include_payload)
