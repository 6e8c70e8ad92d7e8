"""Building clients from a Source-like object or from settings, without Django."""

from __future__ import annotations

from types import SimpleNamespace

from dashboard.simulator.server import RunningSimulator
from dashboard.upstream.creators import fetch_nfts_by_creators
from dashboard.upstream.factory import clients_for_settings, clients_for_source
from dashboard.upstream.history import fetch_history_page
from dashboard.upstream.owners import fetch_owners_page
from tests.upstream.conftest import KEY


def test_clients_for_settings_reach_every_host(sim: RunningSimulator) -> None:
    settings = SimpleNamespace(
        MORALIS_API_KEY=KEY,
        MORALIS_STREAMS_BASE_URL=sim.base_url,
        MORALIS_EVM_BASE_URL=sim.base_url,
        MORALIS_APTOS_MAINNET_BASE_URL=sim.aptos_mainnet_base_url,
        MORALIS_APTOS_TESTNET_BASE_URL=sim.aptos_testnet_base_url,
        UPSTREAM_CONNECT_TIMEOUT=2,
        UPSTREAM_READ_TIMEOUT=3,
        UPSTREAM_MAX_RETRIES=1,
    )
    with clients_for_settings(settings) as clients:
        assert clients.history.settings.read_timeout == 3.0 and clients.evm.settings.max_retries == 1
        assert fetch_history_page(clients.history, limit=2).records
        assert fetch_owners_page(clients.evm, "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d", limit=2).records
        creator = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
        main = fetch_nfts_by_creators(clients.aptos("mainnet"), creator, limit=2)
        test = fetch_nfts_by_creators(clients.aptos("testnet"), creator, limit=2)
        assert main.records[0].token_data_id_hash != test.records[0].token_data_id_hash
        assert KEY not in repr(clients)


def test_clients_for_source_use_its_urls(sim: RunningSimulator) -> None:
    from dashboard.upstream.client import ClientSettings

    source = SimpleNamespace(
        api_key=KEY, streams_base_url=sim.base_url + "/", evm_base_url="http://evm.invalid",
        aptos_mainnet_base_url="http://main.invalid", aptos_testnet_base_url="http://test.invalid",
    )  # fmt: skip
    with clients_for_source(source, ClientSettings(api_key=KEY)) as clients:
        assert clients.history.base_url == sim.base_url and clients.evm.base_url == "http://evm.invalid"
        assert fetch_history_page(clients.history, limit=1).records
