"""Clients for a source: one place reads the UPSTREAM_* settings, three retry policies from it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from dashboard.sources.clients import all_clients, page_settings, poller_settings, probe_settings
from dashboard.upstream.creators import fetch_nfts_by_creators
from dashboard.upstream.history import fetch_history_page
from dashboard.upstream.owners import fetch_owners_page

pytestmark = pytest.mark.django_db


@override_settings(UPSTREAM_CONNECT_TIMEOUT=2, UPSTREAM_READ_TIMEOUT=3, UPSTREAM_MAX_RETRIES=3)
def test_the_three_policies_come_from_the_same_settings() -> None:
    poller, page, probe = poller_settings("k"), page_settings("k"), probe_settings("k")
    assert (poller.connect_timeout, poller.read_timeout, poller.max_retries) == (2.0, 3.0, 3)
    assert page.max_retries == 1 and page.read_timeout == 3.0
    assert probe.max_retries == 0 and probe.read_timeout == 3.0


def test_all_clients_reach_every_host_of_the_source(source: Any) -> None:
    with all_clients(source) as clients:
        assert fetch_history_page(clients.history, limit=2).records
        assert fetch_owners_page(clients.evm, "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d", limit=2).records
        creator = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
        main = fetch_nfts_by_creators(clients.aptos("mainnet"), creator, limit=2)
        test = fetch_nfts_by_creators(clients.aptos("testnet"), creator, limit=2)
        assert main.records[0].token_data_id_hash != test.records[0].token_data_id_hash
        assert source.api_key not in repr(clients)
