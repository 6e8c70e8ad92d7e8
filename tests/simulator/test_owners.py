"""GET /api/v2/nft/{address}/owners: validation, parameters, paging and the SYNCING → SYNCED transition."""

from __future__ import annotations

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator

BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
PARALLEL = "0x76be3b62873462d2142405439777e971754e8e77"  # not indexed before the first request


def owners(http: httpx.Client, address: str = BAYC, **params: object) -> httpx.Response:
    return http.get(f"/api/v2/nft/{address}/owners", params=params)


@pytest.mark.parametrize(
    "address, params, message",
    [
        ("0x123", {}, "Invalid address provided"),
        ("0x" + "g" * 40, {}, "Invalid address provided"),
        (BAYC, {"chain": "dogecoin"}, "Invalid chain provided"),
        (BAYC, {"chain": "0x999"}, "Invalid chain provided"),
        (BAYC, {"limit": 101}, "limit must not be greater than 100"),
        (BAYC, {"limit": 0}, "limit must not be less than 1"),
        (BAYC, {"format": "octal"}, "format must be one of the following values: decimal, hex"),
        (BAYC, {"disable_total": "nope"}, "disable_total must be a boolean value (true or false)"),
        (BAYC, {"cursor": "x.y.z"}, "Invalid cursor"),
        (BAYC, {"limit": "\uff15"}, "limit must be an integer number"),
        (BAYC + "%0A", {}, "Invalid address provided"),
        ("0x%ff" + "a" * 38, {}, "Invalid address provided"),
    ],
)
def test_it_answers_400_in_the_evm_style(
    http: httpx.Client, address: str, params: dict, message: str
) -> None:
    response = owners(http, address, **params)
    assert response.status_code == 400
    assert response.json() == {"message": message}


def test_the_address_is_read_percent_decoded(http: httpx.Client) -> None:
    encoded = "0x%62" + BAYC[3:]
    response = owners(http, encoded, limit=3)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == owners(http, BAYC, limit=3).json()["result"]


def test_it_requires_the_key(sim: RunningSimulator) -> None:
    response = httpx.get(f"{sim.base_url}/api/v2/nft/{BAYC}/owners")
    assert response.status_code == 401
    assert response.json() == {"message": "API KEY missing from x-api-key header"}


def test_defaults_and_total(http: httpx.Client) -> None:
    body = owners(http).json()
    assert body["status"] == "SYNCED" and body["total"] is None and body["page_size"] == 100
    assert body["result"][0]["normalized_metadata"] is None and "media" not in body["result"][0]
    counted = owners(http, disable_total="false").json()
    assert counted["total"] >= 150


def test_chain_by_name_or_hex_and_address_case(http: httpx.Client) -> None:
    by_name = owners(http, chain="eth", limit=5).json()["result"]
    by_hex = owners(http, BAYC.upper().replace("0X", "0x"), chain="0x1", limit=5).json()["result"]
    assert by_name == by_hex
    polygon = owners(http, chain="polygon", limit=5).json()["result"]
    assert polygon != by_name


def test_format_hex_gives_the_same_ids_in_hex(http: httpx.Client) -> None:
    decimal = owners(http, limit=20).json()["result"]
    hexed = owners(http, limit=20, format="hex").json()["result"]
    assert [hex(int(o["token_id"])) for o in decimal] == [o["token_id"] for o in hexed]


def test_normalize_metadata_and_media_items(http: httpx.Client) -> None:
    body = owners(http, limit=30, normalizeMetadata="true", media_items="true").json()
    with_metadata = [o for o in body["result"] if o["metadata"]]
    assert with_metadata
    for owner in with_metadata:
        assert owner["normalized_metadata"]["name"]
        assert "media" in owner


def test_cursor_pages_cover_all_owners_and_carry_the_page_size(http: httpx.Client) -> None:
    first = owners(http, limit=40, disable_total="false").json()
    seen = list(first["result"])
    cursor, page = first["cursor"], 1
    while cursor:
        body = owners(http, limit=100, cursor=cursor, disable_total="false").json()
        page += 1
        assert body["page"] == page and body["page_size"] == 40
        seen.extend(body["result"])
        cursor = body["cursor"]
    assert len(seen) == first["total"]
    assert len({(o["token_id"], o["owner_of"]) for o in seen}) == len(seen)


def test_a_cursor_for_another_contract_is_refused(http: httpx.Client) -> None:
    cursor = owners(http, limit=5).json()["cursor"]
    response = owners(http, "0xed5af388653567af2f388e6224dc7c4b3241c544", cursor=cursor)
    assert response.status_code == 400


def test_a_new_contract_is_syncing_then_synced(sim: RunningSimulator, http: httpx.Client) -> None:
    first = owners(http, PARALLEL, disable_total="false").json()
    assert first["status"] == "SYNCING"
    assert first["total"] == len(first["result"]) == 0
    sim.world.clock.advance(10)
    half = owners(http, PARALLEL, disable_total="false").json()
    assert half["status"] == "SYNCING" and 0 < half["total"]
    sim.world.clock.advance(11)
    done = owners(http, PARALLEL, disable_total="false").json()
    assert done["status"] == "SYNCED" and done["total"] > half["total"]


def test_any_valid_address_answers_possibly_empty(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.owners.sync_delay = 0
    sizes = [owners(http, "0x" + f"{i:040x}", disable_total="false").json()["total"] for i in range(1, 40)]
    assert 0 in sizes and max(sizes) > 0


def test_history_nft_contracts_exist_in_owners(sim: RunningSimulator, http: httpx.Client) -> None:
    records = sim.world.history_records(include_payload=True)
    contracts = {
        (r["payload"]["chainId"], t["contract"]) for r in records for t in r["payload"]["nftTransfers"]
    }
    assert contracts
    chain, contract = sorted(contracts)[0]
    sim.world.owners.sync_delay = 0
    assert owners(http, contract, chain=chain).json()["result"]


def test_no_token_of_a_verified_collection_is_flagged_as_spam() -> None:
    from dashboard.simulator import catalog
    from dashboard.simulator.owners import OwnersWorld

    world = OwnersWorld(seed=5, sync_delay=0, start=1_700_000_000.0)
    chain = catalog.CHAINS_BY_HEX["0x1"]
    checked = 0
    for n in range(400):
        contract = world.contract(chain, "0x" + f"{n:040x}")
        if contract.verified:
            checked += 1
            assert not any(t.possible_spam for t in contract.tokens)
    assert checked > 0
