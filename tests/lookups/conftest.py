"""Fixtures for the lookup pages: a viewer, a record of every upstream request, a canned upstream.

The pages talk to the session's simulator over real HTTP. `upstream_requests` wraps the real transport
so a test can see exactly what reached the upstream (path, query string in order, headers).
`canned_upstream` is a second real HTTP server that answers fixed bodies, for data the simulator
never produces (hostile metadata, odd shapes).
"""

from __future__ import annotations

import json
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from dashboard.accounts.roles import VIEWERS, assign_role
from dashboard.lookups import services
from dashboard.sources.clients import page_settings
from dashboard.upstream.client import UpstreamClient
from tests.conftest import SIMULATOR_KEY, make_user

# The simulator's pre-indexed, well-known contracts (SYNCED from the first request).
BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
UNSTOPPABLE = "0xa9a6a3626993d487d2dbda3173cf58ca1a9d9e9f"  # on polygon (0x89)
APTOS_CREATOR = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
APTOS_CREATOR_2 = "0x9125e4054d884fdc7296b66e12c0d63a7baa0d88c77e8e784987c0a967c670ac"
APTOS_TESTNET_CREATOR = "0x0b11e89a399fa11c802099024498da9fc6512bd3d2d3068f0e78320bd6243990"


def fresh_contract() -> str:
    """An address the simulator has never seen: its first request starts indexing (SYNCING)."""
    return "0x" + "".join(random.choices("0123456789abcdef", k=40))


def closed_port_url() -> str:
    """A base URL on a local port nobody listens on: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _clean_cache_and_faults(simulator: Any) -> Iterator[None]:
    cache.clear()
    yield
    simulator.world.faults.rate_429 = 0.0
    simulator.world.faults.retry_after = 1.0
    simulator.world.faults.rate_5xx = 0.0


@pytest.fixture
def viewer(db: None) -> User:
    user = make_user("vera")
    assign_role(user, VIEWERS)
    return user


@pytest.fixture
def viewer_client(viewer: User) -> Client:
    http = Client()
    http.force_login(viewer)
    return http


class RecordingTransport(httpx.HTTPTransport):
    def __init__(self, log: list[httpx.Request]) -> None:
        super().__init__()
        self.log = log

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.log.append(request)
        return super().handle_request(request)


@pytest.fixture
def upstream_requests(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Every request the pages send upstream, in order, as httpx saw it on the wire."""
    log: list[httpx.Request] = []

    def page_client(source: Any, base_url: str) -> UpstreamClient:
        settings = page_settings(source.api_key)
        return UpstreamClient(base_url, settings, transport=RecordingTransport(log))

    monkeypatch.setattr(services, "page_client", page_client)
    return log


@dataclass
class CannedUpstream:
    base_url: str
    # path -> (status, body); the body is sent as JSON unless it is bytes.
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)


@pytest.fixture
def canned_upstream() -> Iterator[CannedUpstream]:
    state: dict[str, CannedUpstream] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            canned = state["upstream"]
            canned.seen.append(self.path)
            status, body = canned.answers.get(urlsplit(self.path).path, (404, {"message": "Not found"}))
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["upstream"] = CannedUpstream(base_url=f"http://127.0.0.1:{server.server_address[1]}")
    yield state["upstream"]
    server.shutdown()
    server.server_close()


def make_source(
    name: str = "simulator", *, simulator: Any = None, api_key: str = SIMULATOR_KEY, **urls: str
) -> Any:
    """A source on the given simulator, or on nowhere; any host can be pointed elsewhere by its *_base_url."""
    from tests import factories

    base = simulator.base_url if simulator is not None else urls.get("evm_base_url", factories.NOWHERE)
    return factories.make_source(name, base_url=base, api_key=api_key, **urls)
