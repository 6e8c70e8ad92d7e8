"""A simulator per test: fixed seed, fixed start, and a clock that moves only when the test moves it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from dashboard.simulator.config import SimulatorConfig
from dashboard.simulator.server import RunningSimulator, serve_in_thread

KEY = "sim-test-key-5f2c"
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def make_config(**overrides: object) -> SimulatorConfig:
    values: dict[str, object] = {
        "host": "127.0.0.1",
        "port": 0,
        "api_key": KEY,
        "seed": 11,
        "speed": 0.0,
        "start": START,
    }
    values.update(overrides)
    return SimulatorConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def sim() -> Iterator[RunningSimulator]:
    running = serve_in_thread(make_config())
    yield running
    running.stop()


@pytest.fixture
def http(sim: RunningSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, headers={"X-API-Key": KEY}, timeout=10) as client:
        yield client
