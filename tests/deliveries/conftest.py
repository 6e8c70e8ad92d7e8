"""Fixtures for ingestion tests: a private simulator per test (its clock and fault knobs are turned freely),
a source pointing at it, and checks that derived data equals what the stored rows say."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import SIMULATOR_KEY
from tests.deliveries.support import make_source

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def make_simulator() -> Iterator[Callable[..., Any]]:
    from dashboard.simulator.config import SimulatorConfig
    from dashboard.simulator.server import serve_in_thread

    running: list[Any] = []

    def make(**overrides: Any) -> Any:
        config = {"host": "127.0.0.1", "port": 0, "api_key": SIMULATOR_KEY, "seed": 11, "speed": 0,
                  "start": START, "history_window_days": 2}
        config.update(overrides)
        sim = serve_in_thread(SimulatorConfig(**config))
        running.append(sim)
        return sim

    yield make
    for sim in running:
        sim.stop()


@pytest.fixture
def sim(make_simulator: Callable[..., Any]) -> Any:
    return make_simulator()


@pytest.fixture
def sim_source(db: None, sim: Any) -> Any:
    return make_source(sim)


@pytest.fixture(autouse=True)
def _fast_upstream(settings: Any) -> None:
    # Quick retries so fault tests stay fast; the behaviour is the same as with production values.
    settings.UPSTREAM_MAX_RETRIES = 3
    settings.UPSTREAM_READ_TIMEOUT = 2
    settings.UPSTREAM_CONNECT_TIMEOUT = 2


@pytest.fixture(autouse=True)
def _no_stale_locks() -> None:
    from dashboard.deliveries.locks import _redis

    _redis.cache_clear()
    client = _redis()
    for key in client.scan_iter("lock:*"):
        client.delete(key)
