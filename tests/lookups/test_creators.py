"""The NFTs-by-creators page against the simulator's Aptos hosts over HTTP."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

import httpx
from django.test import Client

from tests.lookups.conftest import (
    APTOS_CREATOR,
    APTOS_CREATOR_2,
    APTOS_TESTNET_CREATOR,
    SIMULATOR_KEY,
)

URL = "/lookups/creators/"


def links(html: str, rel: str) -> str | None:
    found = re.search(rf'href="([^"]*)" rel="{rel}"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def nft_names(html: str) -> list[str]:
    return re.findall(r'<tr class="creator-row">\s*<td><strong>([^<]*)</strong>', html)


def test_it_shows_the_empty_form_without_asking_upstream(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<textarea" in html and 'name="addresses"' in html
    assert 'value="mainnet"' in html and 'value="testnet"' in html
    assert upstream_requests == []


def test_creator_addresses_go_out_as_a_repeated_key(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    short = "0x1"
    response = viewer_client.get(
        URL,
        {
            "addresses": f"{APTOS_CREATOR.upper().replace('0X', '0x')}\r\n\r\n  {APTOS_CREATOR_2}  \r\n{short}\n",
            "network": "mainnet",
            "limit": "30",
        },
    )
    assert response.status_code == 200, response.content[:2000]
    [request] = upstream_requests
    assert request.url.path == "/aptos/mainnet/nfts/creators"
    pairs = parse_qsl(request.url.query.decode(), keep_blank_values=True)
    assert pairs == [
        ("limit", "30"),
        ("creator_addresses", APTOS_CREATOR),
        ("creator_addresses", APTOS_CREATOR_2),
        # Aptos short forms are zero-padded to 64 hex digits, as Aptos defines them.
        ("creator_addresses", "0x" + "0" * 63 + "1"),
    ]
    # The canonical encoding on the wire, not creator_addresses[]= or [0]=.
    assert b"creator_addresses%5B" not in request.url.query and b"creator_addresses[" not in request.url.query
    assert request.headers["X-API-Key"] == SIMULATOR_KEY
    html = response.content.decode()
    assert len(nft_names(html)) == 30
    assert "3 creators" in html


def test_the_network_picks_the_host(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(URL, {"addresses": APTOS_TESTNET_CREATOR, "network": "testnet"})
    assert response.status_code == 200
    assert upstream_requests[0].url.path == "/aptos/testnet/nfts/creators"
    assert "(testnet)" in response.content.decode()


def test_results_are_grouped_by_collection_with_every_column(viewer_client: Client, source: Any) -> None:
    html = viewer_client.get(URL, {"addresses": APTOS_CREATOR, "limit": "100"}).content.decode()
    groups = re.findall(r'<h2 class="group-name">([^<]*)</h2>', html)
    assert groups and len(groups) == len(set(groups))
    assert len(nft_names(html)) == 100
    # Supply / maximum, with u64::MAX shown as unlimited somewhere in 100 tokens.
    assert re.search(r"\d+ / (unlimited|[\d,]+)", html)
    # Royalty as a percentage (numerator / denominator), mutability flags, metadata URI, last transaction.
    assert re.search(r"\d+(\.\d+)? %", html)
    assert "immutable" in html or 'class="tag tag-warn"' in html
    assert 'href="https://arweave.net/' in html
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", html)
    assert re.search(r'version <span class="mono">\d+</span>', html)


def test_it_pages_with_has_next_page_both_ways(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    first = viewer_client.get(URL, {"addresses": APTOS_CREATOR, "limit": "50"}).content.decode()
    names1 = nft_names(first)
    assert len(names1) == 50 and "more on the next page" in first
    second = viewer_client.get(URL + links(first, "next")).content.decode()
    names2 = nft_names(second)
    assert names2 and not set(names1) & set(names2)
    assert "Page 2" in second
    sent = dict(parse_qsl(upstream_requests[-1].url.query.decode()))
    assert sent["cursor"] and "offset" not in sent

    # Walk to the end: the last page has no next link.
    html, pages = second, 2
    while (nxt := links(html, "next")) is not None:
        html = viewer_client.get(URL + nxt).content.decode()
        pages += 1
        assert pages < 20
    assert "last page" in html and 'aria-disabled="true">Next' in html

    asked = len(upstream_requests)
    back = viewer_client.get(URL + links(second, "prev")).content.decode()
    assert nft_names(back) == names1
    assert len(upstream_requests) == asked  # from the cache


def test_bad_addresses_are_named_one_by_one_and_nothing_is_sent(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(URL, {"addresses": f"{APTOS_CREATOR}\nhello\n0x{'g' * 64}\n0x{'1' * 65}"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Address 2, “hello”, is not an Aptos address" in html
    assert f"Address 3, “0x{'g' * 64}”, is not an Aptos address" in html
    assert "Address 4, “0x1111" in html
    assert "Address 1" not in html
    assert "Nothing was sent to the upstream" in html
    # What was typed stays in the textarea to be fixed.
    assert "hello" in re.search(r"<textarea[^>]*>(.*?)</textarea>", html, re.S).group(1)

    too_many = "\n".join("0x" + format(n, "064x") for n in range(1, 27))
    response = viewer_client.get(URL, {"addresses": too_many})
    assert response.status_code == 400
    assert "Up to 25 creator addresses at a time; this list has 26." in response.content.decode()

    for params, message in (
        ({"addresses": ""}, "Enter at least one creator address."),
        ({"addresses": " \n \n"}, "Enter at least one creator address."),
        ({"addresses": APTOS_CREATOR, "network": "devnet"}, "Select a valid choice"),
        ({"addresses": APTOS_CREATOR, "limit": "500"}, "Page size must be between 1 and 100"),
    ):
        response = viewer_client.get(URL, params)
        assert response.status_code == 400, params
        assert message in response.content.decode(), params
    assert upstream_requests == []


def test_twenty_five_addresses_are_allowed(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    many = "\n".join("0x" + format(n, "064x") for n in range(1, 26))
    response = viewer_client.get(URL, {"addresses": many})
    assert response.status_code == 200
    pairs = parse_qsl(upstream_requests[0].url.query.decode())
    assert len([v for k, v in pairs if k == "creator_addresses"]) == 25
