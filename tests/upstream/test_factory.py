"""Building clients from a Source-like object, without Django."""

from __future__ import annotations

from types import SimpleNamespace

from dashboard.simulator.server import RunningSimulator
from dashboard.upstream.factory import clients_for_source
from dashboard.upstream.history import fetch_history_page
from tests.upstream.conftest import KEY


def test_clients_for_source_use_its_urls(sim: RunningSimulator) -> None:
    from dashboard.upstream.client import ClientSettings

    source = SimpleNamespace(
        api_key=KEY, streams_base_url=sim.base_url + "/", evm_base_url="http://evm.invalid",
        aptos_mainnet_base_url="http://main.invalid", aptos_testnet_base_url="http://test.invalid",
    )  # fmt: skip
    with clients_for_source(source, ClientSettings(api_key=KEY)) as clients:
        assert clients.history.base_url == sim.base_url and clients.evm.base_url == "http://evm.invalid"
        assert fetch_history_page(clients.history, limit=1).records
