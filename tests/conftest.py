"""Shared fixtures: the upstream simulator over real HTTP, a source pointing at it, logged-in clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytest_plugins = ["tests.browser.fixtures"]

SIMULATOR_KEY = "test-simulator-key"


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
    from dashboard.deliveries.models import Source

    return Source.objects.create(
        name="simulator",
        api_key=SIMULATOR_KEY,
        streams_base_url=simulator.base_url,
        evm_base_url=simulator.base_url,
        aptos_mainnet_base_url=f"{simulator.base_url}/aptos/mainnet",
        aptos_testnet_base_url=f"{simulator.base_url}/aptos/testnet",
    )


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
