"""The owners-by-contract page against the simulator over HTTP."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
from django.test import Client

from dashboard.live import LIVE_HEADER
from dashboard.lookups.forms import MAX_CURSOR_STACK
from tests.lookups.conftest import BAYC, SIMULATOR_KEY, UNSTOPPABLE, fresh_contract

URL = "/lookups/owners/"


def query_of(request: httpx.Request) -> list[tuple[str, str]]:
    return parse_qsl(request.url.query.decode(), keep_blank_values=True)


def links(html: str, rel: str) -> str | None:
    found = re.search(rf'href="([^"]*)" rel="{rel}"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def token_ids(html: str) -> list[str]:
    return re.findall(r'<span class="mono token-id">([^<]*)</span>', html)


def test_it_shows_the_empty_form_without_asking_upstream(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Owners by contract" in html
    assert 'name="address"' in html
    # Every chain of the contract is offered, by name with its hex id.
    for name in ("eth", "polygon", "bsc testnet", "palm", "arbitrum"):
        assert f'value="{name}"' in html
    assert upstream_requests == []


def test_every_parameter_reaches_the_upstream_as_the_contract_says(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(
        URL,
        {"address": UNSTOPPABLE.upper().replace("0X", "0x"), "chain": "0x89", "format": "hex",
         "normalize_metadata": "on", "media_items": "on", "limit": "10"},
    )  # fmt: skip
    assert response.status_code == 200, response.content[:2000]
    [request] = upstream_requests
    assert request.method == "GET"
    assert request.url.path == f"/api/v2/nft/{UNSTOPPABLE}/owners"
    assert dict(query_of(request)) == {
        "chain": "0x89",
        "format": "hex",
        "limit": "10",
        "disable_total": "false",
        "normalizeMetadata": "true",
        "media_items": "true",
    }
    assert request.headers["X-API-Key"] == SIMULATOR_KEY
    assert request.headers["Accept"] == "application/json"

    html = response.content.decode()
    ids = token_ids(html)
    assert len(ids) == 10 and all(i.startswith("0x") for i in ids)
    # The select shows the chain by name although the link gave its hex id.
    assert re.search(r'<option value="polygon"[^>]*selected', html)
    assert "Unstoppable Domains" in html and "UD" in html
    # Thumbnails from the media cache (or the token's own image), only as http(s) URLs.
    assert re.search(r'<img class="thumb js-thumb" src="https?://', html)
    # The total, because the page asks for it (disable_total=false).
    assert re.search(r'<strong class="js-total">\d+</strong> tokens? in total', html)
    # Each owner links to the deliveries that mention it and to the chain's explorer.
    owner = re.search(r'href="/search/\?q=(0x[0-9a-f]{40})"', html)
    assert owner is not None
    assert f"https://polygonscan.com/address/{owner.group(1)}" in html


def test_thumbnails_come_from_the_simulators_media_cdn_and_load(
    viewer_client: Client, source: Any, simulator: Any
) -> None:
    response = viewer_client.get(URL, {"address": BAYC, "media_items": "on", "limit": "20"})
    assert response.status_code == 200
    srcs = re.findall(r'<img class="thumb js-thumb" src="([^"]*)"', response.content.decode())
    from_cdn = [s for s in srcs if s.startswith(f"{simulator.base_url}/media/")]
    assert from_cdn and all(s.endswith("/low.svg") for s in from_cdn)
    picture = httpx.get(from_cdn[0])  # what the browser does: no key
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/svg+xml"


def test_defaults_are_sent_explicitly(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    response = viewer_client.get(URL, {"address": BAYC})
    assert response.status_code == 200
    [request] = upstream_requests
    assert dict(query_of(request)) == {
        "chain": "0x1",
        "format": "decimal",
        "limit": "25",
        "disable_total": "false",
        "normalizeMetadata": "false",
        "media_items": "false",
    }
    html = response.content.decode()
    assert "BoredApeYachtClub" in html
    assert "SYNCED" in html and "Indexing started" not in html
    assert "<img" not in html  # no media asked, no thumbnails
    assert all(i.isdigit() for i in token_ids(html))


def test_chain_names_aliases_and_hex_ids_are_all_accepted(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    for given, sent in (("polygon", "0x89"), ("0x89", "0x89"), ("137", "0x89"), ("BSC Testnet", "0x61"),
                        ("0xaa36a7", "0xaa36a7"), ("arbitrum", "0xa4b1")):  # fmt: skip
        upstream_requests.clear()
        response = viewer_client.get(URL, {"address": BAYC, "chain": given})
        assert response.status_code == 200, given
        assert dict(query_of(upstream_requests[0]))["chain"] == sent


def test_bad_input_answers_400_with_a_message_and_sends_nothing(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    cases = [
        ({"address": "0x1234"}, "“0x1234” is not a contract address"),
        ({"address": ""}, "Enter an NFT contract address"),
        ({"address": "bc4ca0eda7647a8ab7c2061c2e118a18a936f13d"}, "is not a contract address"),
        ({"address": BAYC, "chain": "solana"}, "“solana” is not a chain the provider serves"),
        ({"address": BAYC, "chain": "0x9999"}, "“0x9999” is not a chain the provider serves"),
        ({"address": BAYC, "format": "octal"}, "Token ids are shown as decimal or hex, not “octal”"),
        ({"address": BAYC, "limit": "0"}, "Page size must be between 1 and 100"),
        ({"address": BAYC, "limit": "101"}, "Page size must be between 1 and 100"),
        ({"address": BAYC, "limit": "lots"}, "Page size must be a whole number"),
        ({"address": BAYC, "source": "99999"}, "That source does not exist or is disabled"),
    ]
    for params, message in cases:
        response = viewer_client.get(URL, params)
        assert response.status_code == 400, params
        html = response.content.decode()
        assert message in html, (params, html[:3000])
        assert "Nothing was sent to the upstream" in html
    assert upstream_requests == []


def test_a_kilobyte_choice_is_echoed_clipped(viewer_client: Client, source: Any) -> None:
    for name in ("chain", "format"):
        response = viewer_client.get(URL, {"address": BAYC, name: "z" * 3000})
        assert response.status_code == 400
        html = response.content.decode()
        assert "z" * 60 + "…" in html and "z" * 100 not in html, name


def test_a_hostile_address_is_echoed_escaped(viewer_client: Client, source: Any) -> None:
    response = viewer_client.get(URL, {"address": "<script>alert(1)</script>"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_pages_forward_and_back_through_a_cursor_stack(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    first = viewer_client.get(URL, {"address": BAYC, "limit": "40"}).content.decode()
    page1 = token_ids(first)
    assert len(page1) == 40
    assert links(first, "prev") is None
    next_url = links(first, "next")
    assert next_url is not None

    second = viewer_client.get(URL + next_url).content.decode()
    page2 = token_ids(second)
    assert len(page2) == 40 and not set(page1) & set(page2)
    assert "Page 2" in second
    # The upstream got the cursor it handed out, and the same limit.
    sent = dict(query_of(upstream_requests[-1]))
    assert sent["cursor"] and sent["limit"] == "40"

    third = viewer_client.get(URL + links(second, "next")).content.decode()
    assert "Page 3" in third
    page3 = token_ids(third)
    assert not set(page3) & (set(page1) | set(page2))

    # Back twice: the same pages again, from the cache, without asking the upstream.
    asked = len(upstream_requests)
    back_to_2 = viewer_client.get(URL + links(third, "prev")).content.decode()
    assert token_ids(back_to_2) == page2 and "Page 2" in back_to_2
    back_to_1 = viewer_client.get(URL + links(back_to_2, "prev")).content.decode()
    assert token_ids(back_to_1) == page1
    assert links(back_to_1, "prev") is None
    assert len(upstream_requests) == asked
    assert "from cache" in back_to_1

    # "First" from page 3 drops the cursor.
    first_again = links(third, "first")
    assert first_again is not None and "cursor" not in first_again


def test_the_last_page_has_no_next_link(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    html = viewer_client.get(URL, {"address": BAYC, "limit": "100"}).content.decode()
    total = int(re.search(r'<strong class="js-total">(\d+)</strong>', html).group(1))
    seen = len(token_ids(html))
    pages = 1
    while (nxt := links(html, "next")) is not None:
        html = viewer_client.get(URL + nxt).content.decode()
        seen += len(token_ids(html))
        pages += 1
        assert pages < 10
    assert seen == total
    assert 'aria-disabled="true">Next' in html


def test_the_cursor_stack_in_the_url_is_bounded(
    viewer_client: Client, source: Any, upstream_requests: list[httpx.Request]
) -> None:
    html = viewer_client.get(URL, {"address": BAYC, "limit": "10"}).content.decode()
    for _ in range(MAX_CURSOR_STACK + 3):
        url = links(html, "next")
        html = viewer_client.get(URL + url).content.decode()
    back = [v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True) if k == "back"]
    assert len(back) == MAX_CURSOR_STACK
    assert f"Page {MAX_CURSOR_STACK + 4}" in html
    assert links(html, "prev") is not None and links(html, "first") is not None


def test_a_new_contract_shows_indexing_and_refreshes_until_synced(
    viewer_client: Client, source: Any, simulator: Any, upstream_requests: list[httpx.Request]
) -> None:
    address = fresh_contract()
    response = viewer_client.get(URL, {"address": address})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Indexing started." in html
    assert "data-syncing" in html and 'data-refresh="5"' in html
    assert '<meta http-equiv="refresh" content="5">' in html  # the no-script fallback
    assert "lookups.js" in html

    # Still indexing halfway: the refresh reaches the upstream again (SYNCING pages are not cached).
    simulator.world.clock.advance(10)
    partial = viewer_client.get(URL, {"address": address}, headers={LIVE_HEADER: "1"})
    body = partial.content.decode()
    assert partial[LIVE_HEADER] == "1"
    assert body.lstrip().startswith('<section id="lookup-results"')
    assert "Indexing started." in body and "<html" not in body
    assert len(upstream_requests) == 2

    simulator.world.clock.advance(15)
    partial = viewer_client.get(URL, {"address": address}, headers={LIVE_HEADER: "1"})
    body = partial.content.decode()
    assert "Indexing started." not in body and "data-syncing" not in body
    assert "SYNCED" in body
    assert len(upstream_requests) == 3
    # Once synced, the page is cached.
    viewer_client.get(URL, {"address": address})
    assert len(upstream_requests) == 3


def test_a_link_from_a_delivery_payload_lands_prefilled(viewer_client: Client, source: Any) -> None:
    response = viewer_client.get(f"{URL}?address={BAYC}&chain=0x1")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'value="{BAYC}"' in html
    assert re.search(r'<option value="eth"[^>]*selected', html)
    assert "BoredApeYachtClub" in html


def test_the_api_key_never_goes_into_cache_keys(viewer_client: Client, source: Any) -> None:
    from django.core.cache import cache

    viewer_client.get(URL, {"address": BAYC})
    keys = [k.decode() for k in cache._cache.get_client().keys("*")]  # type: ignore[attr-defined]
    assert any(":lookups:owners:" in k for k in keys)
    assert not any(SIMULATOR_KEY in k for k in keys)


def test_it_needs_a_login_and_the_viewer_role(client: Client, source: Any) -> None:
    from tests.conftest import make_user

    response = client.get(URL, {"address": BAYC})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(make_user("nobody", role=None))
    assert client.get(URL, {"address": BAYC}).status_code == 403
