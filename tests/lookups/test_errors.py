"""Upstream failures on the lookup pages: a readable message for each, never a 500."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.lookups.conftest import APTOS_CREATOR, BAYC, CannedUpstream, closed_port_url, make_source

OWNERS = "/lookups/owners/"
CREATORS = "/lookups/creators/"


def test_a_rejected_key_is_said_plainly(viewer_client: Client, db: None, simulator: Any) -> None:
    make_source(simulator=simulator, api_key="not-the-right-key")
    for url, params in ((OWNERS, {"address": BAYC}), (CREATORS, {"addresses": APTOS_CREATOR})):
        response = viewer_client.get(url, params)
        assert response.status_code == 200
        html = response.content.decode()
        assert 'data-problem="rejected_key"' in html
        assert "The upstream rejected the API key" in html
        assert "Token is invalid format" in html
        assert "not-the-right-key" not in html


def test_rate_limiting_says_when_to_retry(viewer_client: Client, source: Any, simulator: Any) -> None:
    simulator.world.faults.rate_429 = 1.0
    simulator.world.faults.retry_after = 7
    for url, params in ((OWNERS, {"address": BAYC}), (CREATORS, {"addresses": APTOS_CREATOR})):
        response = viewer_client.get(url, params)
        assert response.status_code == 200
        html = response.content.decode()
        assert 'data-problem="rate_limited"' in html
        assert "Rate limited by the upstream — retry in 7 s" in html
        assert "Rate limit exceeded" in html


def test_a_failure_is_not_cached(viewer_client: Client, source: Any, simulator: Any) -> None:
    simulator.world.faults.rate_429 = 1.0
    simulator.world.faults.retry_after = 9
    assert "retry in 9 s" in viewer_client.get(OWNERS, {"address": BAYC}).content.decode()
    simulator.world.faults.rate_429 = 0.0
    html = viewer_client.get(OWNERS, {"address": BAYC}).content.decode()
    assert "BoredApeYachtClub" in html and "data-problem" not in html


def test_the_upstreams_400_text_is_shown(viewer_client: Client, source: Any) -> None:
    response = viewer_client.get(OWNERS, {"address": BAYC, "cursor": "not.a-real.cursor", "back": ""})
    assert response.status_code == 400
    html = response.content.decode()
    assert "The upstream refused the request" in html and "answered 400: Invalid cursor" in html
    assert "Start again from the first page" in html

    response = viewer_client.get(CREATORS, {"addresses": APTOS_CREATOR, "cursor": "forged", "back": ""})
    assert response.status_code == 400
    assert "answered 400: cursor is not valid" in response.content.decode()


def test_an_unreachable_evm_host_is_named(viewer_client: Client, db: None) -> None:
    dead = closed_port_url()
    make_source(evm_base_url=dead)
    response = viewer_client.get(OWNERS, {"address": BAYC})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-problem="unreachable"' in html
    assert f"The upstream host {dead.removeprefix('http://')} does not answer" in html
    assert "Could not reach" in html


def test_an_unreachable_aptos_host_mentions_the_retired_api(viewer_client: Client, db: None) -> None:
    dead = closed_port_url()
    make_source(aptos_mainnet_base_url=dead, aptos_testnet_base_url=dead)
    for network in ("mainnet", "testnet"):
        response = viewer_client.get(CREATORS, {"addresses": APTOS_CREATOR, "network": network})
        assert response.status_code == 200
        html = response.content.decode()
        assert 'data-problem="unreachable"' in html
        assert "retirement of its hosted Aptos API" in html


def test_server_errors_are_reported_after_a_retry(viewer_client: Client, source: Any, simulator: Any) -> None:
    simulator.world.faults.rate_5xx = 1.0
    response = viewer_client.get(OWNERS, {"address": BAYC})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-problem="upstream_error"' in html
    assert "The upstream failed" in html


def test_a_body_that_is_not_the_contracts_shape_is_reported(
    viewer_client: Client, db: None, canned_upstream: CannedUpstream
) -> None:
    make_source(evm_base_url=canned_upstream.base_url, aptos_mainnet_base_url=canned_upstream.base_url)
    canned_upstream.answers[f"/api/v2/nft/{BAYC}/owners"] = (200, b"<html>gateway</html>")
    canned_upstream.answers["/nfts/creators"] = (200, {"result": "nope"})
    for url, params in ((OWNERS, {"address": BAYC}), (CREATORS, {"addresses": APTOS_CREATOR})):
        response = viewer_client.get(url, params)
        assert response.status_code == 200
        assert "The upstream&#x27;s answer could not be read" in response.content.decode()


def test_a_missing_operation_is_a_404_message(
    viewer_client: Client, db: None, canned_upstream: CannedUpstream
) -> None:
    make_source(aptos_mainnet_base_url=canned_upstream.base_url)
    html = viewer_client.get(CREATORS, {"addresses": APTOS_CREATOR}).content.decode()
    assert 'data-problem="not_found"' in html and "retirement of its hosted Aptos API" in html


def test_without_any_source_the_page_says_what_to_configure(viewer_client: Client, db: None) -> None:
    response = viewer_client.get(OWNERS, {"address": BAYC})
    assert response.status_code == 200
    assert "No upstream source is configured" in response.content.decode()


def test_a_source_is_chosen_from_the_url(viewer_client: Client, db: None, simulator: Any) -> None:
    make_source("broken", simulator=simulator, api_key="wrong-key")
    good = make_source("good", simulator=simulator)
    html = viewer_client.get(OWNERS, {"address": BAYC}).content.decode()
    assert "rejected the API key" in html  # "broken" comes first by name
    assert 'name="source"' in html  # two sources: the choice is offered
    html = viewer_client.get(OWNERS, {"address": BAYC, "source": str(good.pk)}).content.decode()
    assert "BoredApeYachtClub" in html
    assert f"source={good.pk}" in html.replace("&amp;", "&")  # kept in the paging links
