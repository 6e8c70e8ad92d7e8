"""The three typed operations against the simulator: parameters on the wire, records, cursors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dashboard.simulator.server import RunningSimulator
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.creators import fetch_nfts_by_creators, iter_nfts_by_creators_pages
from dashboard.upstream.history import fetch_history_page, iter_history_pages
from dashboard.upstream.owners import fetch_owners_page, iter_owners, iter_owners_pages
from tests.upstream.conftest import Recording

MakeClient = Callable[..., UpstreamClient]
BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
PARALLEL = "0x76be3b62873462d2142405439777e971754e8e77"
A = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
B = "0x9125e4054d884fdc7296b66e12c0d63a7baa0d88c77e8e784987c0a967c670ac"


def test_every_call_sends_the_key_and_accept_headers(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    headers = client._http.headers
    assert headers["X-API-Key"] and headers["Accept"] == "application/json"
    assert fetch_history_page(client, limit=1).records


def test_history_pages_walk_to_the_end(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    pages = list(iter_history_pages(client, limit=100, exclude_payload=True))
    ids = [r["id"] for p in pages for r in p.records]
    assert ids == [r["id"] for r in sim.world.history_records()]
    assert pages[-1].cursor is None and all(p.total == len(ids) for p in pages)
    assert all("payload" not in r for p in pages for r in p.records)
    assert len(list(iter_history_pages(client, limit=10, max_pages=3))) == 3


@pytest.mark.parametrize("chain", ["polygon", "0x89", "POLYGON", "137", "matic"])
def test_chains_by_name_or_id_reach_the_upstream_as_one_hex_id(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, chain: str
) -> None:
    page = fetch_owners_page(
        make_client(sim.base_url), "0xA9A6A3626993D487D2DBDA3173CF58CA1A9D9E9F", chain=chain
    )
    assert page.records and page.status == "SYNCED"
    assert wire.urls[-1].params["chain"] == "0x89"
    assert wire.urls[-1].path == "/api/v2/nft/0xa9a6a3626993d487d2dbda3173cf58ca1a9d9e9f/owners"


def test_owners_parameters_are_all_sent_and_honoured(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording
) -> None:
    page = fetch_owners_page(
        make_client(sim.base_url), BAYC, format="hex", limit=10, disable_total=False,
        normalize_metadata=True, media_items=True,
    )  # fmt: skip
    sent = wire.urls[-1].params
    assert (sent["format"], sent["limit"], sent["disable_total"]) == ("hex", "10", "false")
    assert (sent["normalizeMetadata"], sent["media_items"]) == ("true", "true")
    assert page.total and page.total > 10 and page.page == 1 and page.page_size == 10
    record = page.records[0]
    assert record.token_id.startswith("0x") and record.token_id_int == int(record.token_id, 16)
    assert record.normalized_metadata is not None and record.media is not None
    assert record.block_number and record.block_number >= record.block_number_minted  # type: ignore[operator]
    assert record.extra == {"minter_address": None}


def test_owners_iteration_follows_cursors_and_sees_syncing(
    sim: RunningSimulator, make_client: MakeClient
) -> None:
    client = make_client(sim.base_url)
    first = fetch_owners_page(client, PARALLEL)
    assert first.syncing and first.records == []
    sim.world.clock.advance(60)
    pages = list(iter_owners_pages(client, PARALLEL, limit=50, disable_total=False))
    assert not pages[0].syncing and len(pages) > 1
    assert sum(len(p.records) for p in pages) == pages[0].total
    assert len(list(iter_owners(client, PARALLEL, limit=100))) == pages[0].total


def test_creator_addresses_go_out_as_the_repeated_key(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording
) -> None:
    client = make_client(sim.aptos_mainnet_base_url)
    page = fetch_nfts_by_creators(client, [A, B.upper().replace("0X", "0x"), A], limit=20, offset=3)
    url = wire.urls[-1]
    assert url.path == "/aptos/mainnet/nfts/creators"
    assert url.params.get_list("creator_addresses") == [A, B]
    assert "creator_addresses%5B" not in str(url) and url.params["offset"] == "3"
    assert len(page.records) == 20 and page.has_next_page and page.cursor
    assert {r.creator_address for r in page.records} <= {A, B}


def test_creators_on_mainnet_and_testnet_differ(sim: RunningSimulator, make_client: MakeClient) -> None:
    main = fetch_nfts_by_creators(make_client(sim.aptos_mainnet_base_url), A, limit=10)
    test = fetch_nfts_by_creators(make_client(sim.aptos_testnet_base_url), A, limit=10)
    assert {r.token_data_id_hash for r in main.records}.isdisjoint(r.token_data_id_hash for r in test.records)


def test_creators_iteration_reaches_the_last_page(sim: RunningSimulator, make_client: MakeClient) -> None:
    pages = list(iter_nfts_by_creators_pages(make_client(sim.aptos_mainnet_base_url), [A], limit=100))
    assert len(pages) >= 2 and pages[-1].cursor is None and not pages[-1].has_next_page
    hashes = [r.token_data_id_hash for p in pages for r in p.records]
    assert len(hashes) == len(set(hashes))
    record = pages[0].records[0]
    assert record.maximum is not None and record.last_transaction_timestamp is not None


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda c: fetch_owners_page(c, "0x12345"), "0x12345"),
        (lambda c: fetch_owners_page(c, BAYC + "00"), BAYC + "00"),
        (lambda c: fetch_owners_page(c, BAYC, chain="solana"), "solana"),
        (lambda c: fetch_owners_page(c, BAYC, limit=500), "500"),
        (lambda c: fetch_nfts_by_creators(c, [A, "0xnot-an-address"]), "0xnot-an-address"),
        (lambda c: fetch_nfts_by_creators(c, []), "at least one"),
        (lambda c: fetch_nfts_by_creators(c, [f"0x{i:064x}" for i in range(1, 27)]), "at most 25"),
        (lambda c: fetch_nfts_by_creators(c, [A], offset=101), "101"),
        (lambda c: fetch_history_page(c, limit=0), "0"),
    ],
)
def test_bad_input_is_refused_before_any_request(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, call: Callable, named: str
) -> None:
    served = sim.world.requests_served
    with pytest.raises(errors.InvalidRequest) as caught:
        call(make_client(sim.base_url))
    assert named in str(caught.value)
    assert wire.urls == [] and sim.world.requests_served == served
