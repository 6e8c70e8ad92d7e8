"""Shared fixtures: the upstream simulator over real HTTP, a source pointing at it, logged-in clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytest_plugins = ["tests.browser.fixtures"]

SIMULATOR_KEY = "test-simulator-key"


@pytest.fixture(autouse=True)
def _counts_exact_under_load(settings: Any) -> None:
    """Counts get a generous time budget in tests, so a loaded machine never turns an exact count of a few
    rows into an estimate; tests of the budget set their own."""
    settings.COUNT_BUDGET_MS = 5_000


@pytest.fixture(scope="session")
def simulator() -> Iterator[Any]:
    """A simulator with a fixed seed and a clock that only moves when a test moves it."""
    from dashboard.simulator.config import SimulatorConfig
    from dashboard.simulator.server import serve_in_thread

    running = serve_in_thread(SimulatorConfig(host="127.0.0.1", port=0, api_key=SIMULATOR_KEY, seed=7, speed=0))
    yield running
    running.stop()


@pytest.fixture
def source(db: None, simulator: Any) -> Any:
    from tests.factories import make_source

    return make_source("simulator", base_url=simulator.base_url, api_key=SIMULATOR_KEY)


def make_user(username: str = "alice", *, staff: bool = False, role: str | None = "Viewers") -> User:
    """A user with a password; a viewer by default, a superuser with `staff`, no role with `role=None`."""
    user = User.objects.create_user(username, f"{username}@example.com", "correct-horse-battery")
    if staff:
        user.is_staff = True
        user.is_superuser = True
        user.save()
    elif role is not None:
        from dashboard.accounts.roles import assign_role

        assign_role(user, role)
    return user


@pytest.fixture
def user(db: None) -> User:
    return make_user()


@pytest.fixture
def logged_in_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


# A private simulator per test, for tests that turn its clock and fault knobs freely.
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
    """A source reading the test's own simulator."""
    from tests.factories import source_for

    return source_for(sim)


@pytest.fixture
def fast_upstream(settings: Any) -> None:
    # Quick retries so fault tests stay fast; the behaviour is the same as with production values.
    settings.UPSTREAM_MAX_RETRIES = 3
    settings.UPSTREAM_READ_TIMEOUT = 2
    settings.UPSTREAM_CONNECT_TIMEOUT = 2


@pytest.fixture
def no_stale_locks() -> None:
    from dashboard.locks import redis_client

    redis_client.cache_clear()
    client = redis_client()
    for key in client.scan_iter("lock:*"):
        client.delete(key)


@pytest.fixture
def polled(sim_source: Any, no_stale_locks: None) -> Any:
    """The test's simulator's history stored (several polls: the first walk may need more than one)."""
    from dashboard.polling.walks import poll

    for _ in range(20):
        result = poll(sim_source)
        if result.complete and sim_source.synced_through is not None:
            break
    sim_source.refresh_from_db()
    return sim_source
