"""The simulator over HTTP, and clients for it whose sleeps are recorded instead of slept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest

from dashboard.simulator.config import SimulatorConfig
from dashboard.simulator.server import RunningSimulator, serve_in_thread
from dashboard.upstream.client import ClientSettings, UpstreamClient

KEY = "upstream-test-key-9d41e7"


@pytest.fixture
def sim() -> Iterator[RunningSimulator]:
    running = serve_in_thread(
        SimulatorConfig(port=0, api_key=KEY, seed=5, speed=0, start=datetime(2025, 6, 1, tzinfo=UTC))
    )
    yield running
    running.stop()


@dataclass
class Sleeps:
    """An injectable sleep: records delays and can run a hook (e.g. lift a fault) on each."""

    delays: list[float] = field(default_factory=list)
    on_sleep: Callable[[], None] | None = None

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep()


class Recording(httpx.HTTPTransport):
    """A real transport that remembers every URL it sent, to see what went on the wire."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[httpx.URL] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(request.url)
        return super().handle_request(request)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def wire() -> Recording:
    return Recording()


@pytest.fixture
def make_client(sleeps: Sleeps, wire: Recording) -> Iterator[Callable[..., UpstreamClient]]:
    made: list[UpstreamClient] = []

    def make(base_url: str, key: str = KEY, **settings: object) -> UpstreamClient:
        values: dict[str, object] = {"max_retries": 3, "backoff_base": 0.01, "read_timeout": 5.0}
        values.update(settings)
        client = UpstreamClient(base_url, ClientSettings(api_key=key, **values), transport=wire, sleep=sleeps)  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
