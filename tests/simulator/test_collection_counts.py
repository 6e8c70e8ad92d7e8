"""A collection's token count matches what paging returns: the owners' `total` is the number of records
the cursor pages through, on every page, for every kind of contract; a creator's collection numbers its
tokens #1…#n, n being the tokens paging returns for that collection."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import httpx
import pytest

from dashboard.simulator import catalog
from dashboard.simulator.server import RunningSimulator

BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
CREATOR = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"


def page_through_owners(http: httpx.Client, address: str, limit: int) -> tuple[list[dict[str, Any]], set[int]]:
    """Every owner record of a contract by cursor, and every `total` the pages stated."""
    records: list[dict[str, Any]] = []
    totals: set[int] = set()
    params: dict[str, Any] = {"limit": limit, "disable_total": "false"}
    while True:
        response = http.get(f"/api/v2/nft/{address}/owners", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "SYNCED"
        records += body["result"]
        totals.add(body["total"])
        if not body["cursor"]:
            return records, totals
        params = {"cursor": body["cursor"], "disable_total": "false"}


def contracts(sim: RunningSimulator) -> dict[str, str]:
    """A known collection and generated ones of each kind: ERC-721, ERC-1155, 256-bit ids, empty."""
    found = {"known": BAYC}
    chain = catalog.CHAINS_BY_HEX["0x1"]
    for n in range(1, 400):
        address = "0x" + f"{n:040x}"
        contract = sim.world.owners.contract(chain, address)
        ids = [t.token_id for t in contract.tokens]
        kind = ("empty" if not ids else "huge ids" if max(ids) >= 2**64 else contract.contract_type)
        found.setdefault(kind, address)
        if len(found) == 5:
            break
    assert set(found) == {"known", "empty", "huge ids", "ERC721", "ERC1155"}, found
    return found


@pytest.mark.parametrize("limit", [1, 37, 100])
def test_the_owners_total_is_what_the_cursor_pages_through(
    sim: RunningSimulator, http: httpx.Client, limit: int
) -> None:
    sim.world.owners.sync_delay = 0
    for kind, address in contracts(sim).items():
        if limit == 1 and kind != "empty":
            # One record a page: enough to check on the smallest collection.
            tokens = sim.world.owners.contract(catalog.CHAINS_BY_HEX["0x1"], address).tokens
            if len(tokens) > 60:
                continue
        records, totals = page_through_owners(http, address, limit)
        assert totals == {len(records)}, (kind, totals, len(records))
        assert len({(r["token_id"], r["owner_of"]) for r in records}) == len(records), kind
        # Every token of the contract, each once.
        assert len({r["token_hash"] for r in records}) == len(records), kind


def test_a_creators_collections_number_their_tokens_as_paging_counts_them(http: httpx.Client) -> None:
    for network in ("mainnet", "testnet"):
        names: dict[str, list[int]] = defaultdict(list)
        query = f"limit=23&creator_addresses={CREATOR}"
        while True:
            response = http.get(f"/aptos/{network}/nfts/creators?{query}")
            assert response.status_code == 200, response.text
            body = response.json()
            for item in body["result"]:
                match = re.fullmatch(r"(.+) #(\d+)", item["name"])
                assert match is not None and match.group(1) == item["collection_name"], item["name"]
                assert item["description"] == item["name"]
                names[item["collection_data_id_hash"]].append(int(match.group(2)))
            if not body["hasNextPage"]:
                break
            query = f"limit=23&cursor={body['cursor']}&creator_addresses={CREATOR}"
        assert names
        for numbers in names.values():
            assert sorted(numbers) == list(range(1, len(numbers) + 1)), (network, sorted(numbers)[:10])
