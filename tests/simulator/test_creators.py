"""GET /aptos/{network}/nfts/creators: encodings, validation in the NestJS style, paging, networks."""

from __future__ import annotations

import http.client

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator
from tests.simulator.conftest import KEY

A = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
B = "0x9125e4054d884fdc7296b66e12c0d63a7baa0d88c77e8e784987c0a967c670ac"


def creators(http: httpx.Client, query: str, network: str = "mainnet") -> httpx.Response:
    return http.get(f"/aptos/{network}/nfts/creators?{query}")


def hashes(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["token_data_id_hash"] for item in response.json()["result"]]


def test_all_three_encodings_give_the_same_answer(http: httpx.Client) -> None:
    repeated = hashes(creators(http, f"limit=100&creator_addresses={A}&creator_addresses={B}"))
    brackets = hashes(creators(http, f"limit=100&creator_addresses[]={A}&creator_addresses[]={B}"))
    indexed = hashes(creators(http, f"limit=100&creator_addresses[1]={B}&creator_addresses[0]={A}"))
    assert repeated == brackets == indexed
    only_a = hashes(creators(http, f"limit=100&creator_addresses={A}"))
    assert only_a != repeated


def test_mainnet_and_testnet_are_separate(http: httpx.Client) -> None:
    mainnet = hashes(creators(http, f"limit=50&creator_addresses={A}"))
    testnet = hashes(creators(http, f"limit=50&creator_addresses={A}", "testnet"))
    assert mainnet and set(mainnet).isdisjoint(testnet)


@pytest.mark.parametrize(
    "query, messages",
    [
        ("limit=10", ["creator_addresses must contain at least 1 elements"]),
        (f"creator_addresses={A}", ["limit is required"]),
        (f"limit=101&creator_addresses={A}", ["limit must not be greater than 100"]),
        (f"limit=5&offset=101&creator_addresses={A}", ["offset must not be greater than 100"]),
        (
            "limit=5&creator_addresses=0x1234",
            ["each value in creator_addresses must match /^0x[a-fA-F0-9]{64}$/ regular expression"],
        ),
        (
            "limit=5&" + "&".join(f"creator_addresses=0x{i:064x}" for i in range(26)),
            ["creator_addresses must contain no more than 25 elements"],
        ),
        ("limit=0", ["limit must not be less than 1", "creator_addresses must contain at least 1 elements"]),
        (f"limit=5&cursor=a.b.c&creator_addresses={A}", ["cursor is not valid"]),
        (f"limit=%EF%BC%95&creator_addresses={A}", ["limit must be an integer number"]),
        (f"limit=5&offset=%EF%BC%91&creator_addresses={A}", ["offset must be an integer number"]),
        # `$` in a pattern also matches before a final newline; an address with one is still malformed.
        (
            f"limit=5&creator_addresses={A}%0A",
            ["each value in creator_addresses must match /^0x[a-fA-F0-9]{64}$/ regular expression"],
        ),
        (f"limit=5&creator_addresses%0A={A}", ["creator_addresses must contain at least 1 elements"]),
    ],
)
def test_it_answers_400_in_the_nestjs_style(http: httpx.Client, query: str, messages: list[str]) -> None:
    response = creators(http, query)
    assert response.status_code == 400
    assert response.json() == {"statusCode": 400, "message": messages, "error": "Bad Request"}


def test_it_accepts_a_bearer_token_and_refuses_without_a_key(sim: RunningSimulator) -> None:
    url = f"{sim.aptos_testnet_base_url}/nfts/creators?limit=5&creator_addresses={A}"
    assert httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    missing = httpx.get(url)
    assert missing.status_code == 401
    assert missing.json()["statusCode"] == 401 and missing.json()["error"] == "Unauthorized"
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_paging_with_cursor_and_offset(http: httpx.Client) -> None:
    everything = hashes(creators(http, f"limit=100&creator_addresses={A}"))
    assert len(everything) == 100
    collected: list[str] = []
    response = creators(http, f"limit=30&creator_addresses={A}")
    while True:
        body = response.json()
        collected.extend(item["token_data_id_hash"] for item in body["result"])
        if not body["hasNextPage"]:
            assert body["cursor"] is None
            break
        # The cursor carries the page size; a different limit beside it does not change the page.
        response = creators(http, f"limit=7&cursor={body['cursor']}&creator_addresses={A}")
        assert len(response.json()["result"]) <= 30
    assert collected[:100] == everything
    assert len(set(collected)) == len(collected) > 100
    offset = hashes(creators(http, f"limit=10&offset=5&creator_addresses={A}"))
    assert offset == everything[5:15]


def test_an_unknown_creator_may_have_nothing(http: httpx.Client) -> None:
    empties = [creators(http, f"limit=5&creator_addresses=0x{i:064x}").json() for i in range(1, 30)]
    assert any(
        body["result"] == [] and body["cursor"] is None and body["hasNextPage"] is False for body in empties
    )


def test_a_bearer_token_is_used_when_the_key_header_is_empty_and_whitespace_is_not_part_of_a_key(
    sim: RunningSimulator,
) -> None:
    url = f"{sim.aptos_mainnet_base_url}/nfts/creators?limit=1&creator_addresses={A}"
    both = httpx.get(url, headers={"X-API-Key": "", "Authorization": f"Bearer {KEY}"})
    assert both.status_code == 200, both.text
    # httpx refuses to send padded values; http.client sends them as given.
    connection = http.client.HTTPConnection(sim.base_url.removeprefix("http://"), timeout=5)
    connection.request("GET", url.removeprefix(sim.base_url), headers={"X-API-Key": f" {KEY}\t "})
    assert connection.getresponse().status == 200
    connection.close()
    assert httpx.get(url, headers={"X-API-Key": "", "Authorization": "Bearer"}).status_code == 401


def test_no_token_has_a_supply_above_its_maximum(http: httpx.Client) -> None:
    items = []
    for network in ("mainnet", "testnet"):
        body = creators(http, f"limit=100&creator_addresses={A}&creator_addresses={B}", network).json()
        items.extend(body["result"])
    assert any(item["maximum"] == "1" for item in items), "the world should hold one-of-one editions"
    assert all(int(item["supply"]) <= int(item["maximum"]) for item in items)


def test_a_creators_collections_have_distinct_names() -> None:
    from dashboard.simulator.creators import CreatorsWorld

    repeated_before = 0
    for seed in range(40):
        world = CreatorsWorld(seed=seed, network="mainnet", start=1_700_000_000.0)
        for creator in world.known_creators:
            names: dict[str, set[str]] = {}
            for token in world.tokens_of(creator):
                names.setdefault(token.item["collection_data_id_hash"], set()).add(token.item["collection_name"])
            assert all(len(v) == 1 for v in names.values())
            flat = [next(iter(v)) for v in names.values()]
            assert len(flat) == len(set(flat)), (seed, creator)
            repeated_before += sum(1 for name in flat if name.rsplit(" ", 1)[-1].isdigit())
    # The premise: without numbering, names would repeat for some creators.
    assert repeated_before > 0
