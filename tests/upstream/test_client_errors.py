"""Every error path of the transport, against the simulator over real HTTP."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.creators import fetch_nfts_by_creators
from dashboard.upstream.history import fetch_history_page
from dashboard.upstream.owners import fetch_owners_page
from tests.upstream.conftest import KEY, Recording, Sleeps

MakeClient = Callable[..., UpstreamClient]
BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
CREATOR = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"


def test_a_missing_key_reads_as_a_rejected_key(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url, key="")
    with pytest.raises(errors.RejectedKey) as caught:
        fetch_history_page(client, limit=5)
    assert caught.value.message.startswith("the upstream rejected the API key")
    assert "API KEY missing" in caught.value.message
    assert caught.value.status_code == 401 and not caught.value.transient


def test_a_wrong_key_is_raised_at_once_without_retries(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps, wire: Recording
) -> None:
    client = make_client(sim.aptos_mainnet_base_url, key="wrong-key-123")
    with pytest.raises(
        errors.RejectedKey, match="the upstream rejected the API key: Token is invalid format"
    ):
        fetch_nfts_by_creators(client, [CREATOR], limit=5)
    assert sleeps.delays == [] and len(wire.urls) == 1


def test_400_in_the_evm_style_carries_the_message(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    with pytest.raises(errors.BadRequest) as caught:
        client.get_json(f"/api/v2/nft/{BAYC}/owners", {"chain": "solana"})
    assert caught.value.message == "Invalid chain provided" and caught.value.status_code == 400


def test_400_in_the_nestjs_style_carries_every_message(
    sim: RunningSimulator, make_client: MakeClient
) -> None:
    client = make_client(sim.aptos_testnet_base_url)
    with pytest.raises(errors.BadRequest) as caught:
        client.get_json("/nfts/creators", {"limit": 0})
    assert caught.value.message == (
        "limit must not be less than 1; creator_addresses must contain at least 1 elements"
    )


def test_404_is_permanent(sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps) -> None:
    with pytest.raises(errors.NotFound):
        make_client(sim.base_url).get_json("/no/such/path")
    assert sleeps.delays == []


def test_429_honours_retry_after_then_succeeds(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps
) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 7

    def lift() -> None:
        sim.world.faults.rate_429 = 0.0

    sleeps.on_sleep = lift
    page = fetch_history_page(make_client(sim.base_url), limit=5)
    assert len(page.records) == 5
    assert len(sleeps.delays) == 1 and 7 <= sleeps.delays[0] <= 7.5


def test_429_without_relief_raises_rate_limited(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps
) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 2
    with pytest.raises(errors.RateLimited) as caught:
        fetch_history_page(make_client(sim.base_url, max_retries=2), limit=5)
    assert caught.value.retry_after == 2 and caught.value.transient
    assert len(sleeps.delays) == 2


def test_a_retry_after_longer_than_the_client_waits_is_raised_to_the_caller(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps
) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 3600
    with pytest.raises(errors.RateLimited) as caught:
        fetch_history_page(make_client(sim.base_url), limit=5)
    assert caught.value.retry_after == 3600 and sleeps.delays == []


@pytest.mark.parametrize("retry_after", [float("inf"), 1e20])
def test_an_unusable_retry_after_is_read_as_not_said(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps, retry_after: float
) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = retry_after
    with pytest.raises(errors.RateLimited) as caught:
        fetch_history_page(make_client(sim.base_url, max_retries=2), limit=5)
    # The client's own backoff instead, and nothing the caller would overflow a date with.
    assert caught.value.retry_after is None
    assert len(sleeps.delays) == 2 and all(d < 1 for d in sleeps.delays)


def test_5xx_is_retried_with_growing_jittered_backoff(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps
) -> None:
    sim.world.faults.rate_5xx = 1.0
    with pytest.raises(errors.ServerError):
        fetch_history_page(
            make_client(sim.base_url, max_retries=4, backoff_base=1.0, backoff_cap=5.0), limit=5
        )
    assert len(sleeps.delays) == 4
    for attempt, delay in enumerate(sleeps.delays):
        ceiling = min(5.0, 2**attempt)
        assert ceiling / 2 <= delay <= ceiling


def test_5xx_then_success(sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps) -> None:
    sim.world.faults.rate_5xx = 1.0
    sleeps.on_sleep = lambda: setattr(sim.world.faults, "rate_5xx", 0.0)
    page = fetch_owners_page(make_client(sim.base_url), BAYC, limit=3)
    assert len(page.records) == 3 and len(sleeps.delays) == 1


def test_a_slow_upstream_times_out_as_unreachable(sim: RunningSimulator, make_client: MakeClient) -> None:
    sim.world.faults.latency_ms = 400
    client = make_client(sim.base_url, read_timeout=0.05, max_retries=1)
    with pytest.raises(errors.Unreachable, match="timed out") as caught:
        fetch_history_page(client, limit=5)
    assert caught.value.transient


@pytest.mark.parametrize("mode", ["connection", "body"])
def test_a_truncated_body_is_retried(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps, mode: str
) -> None:
    sim.world.faults.truncate_rate = 1.0
    sim.world.faults.truncate_mode = mode
    sleeps.on_sleep = lambda: setattr(sim.world.faults, "truncate_rate", 0.0)
    page = fetch_history_page(make_client(sim.base_url), limit=20)
    assert len(page.records) == 20 and len(sleeps.delays) == 1


def test_a_truncated_body_every_time_ends_in_a_transient_error(
    sim: RunningSimulator, make_client: MakeClient
) -> None:
    sim.world.faults.truncate_rate = 1.0
    sim.world.faults.truncate_mode = "body"
    with pytest.raises(errors.BadResponse, match="not JSON") as caught:
        fetch_history_page(make_client(sim.base_url, max_retries=1), limit=20)
    assert caught.value.transient


def test_connection_refused_is_unreachable(make_client: MakeClient, sleeps: Sleeps) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.Unreachable, match="could not reach"):
        fetch_history_page(make_client(f"http://127.0.0.1:{port}", max_retries=2), limit=5)
    assert len(sleeps.delays) == 2


def test_the_key_never_shows_in_errors_urls_or_logs(
    sim: RunningSimulator, make_client: MakeClient, caplog: pytest.LogCaptureFixture, wire: Recording
) -> None:
    caplog.set_level(logging.DEBUG)
    sim.world.faults.rate_5xx = 0.5
    sim.world.faults.rate_429 = 0.3
    sim.world.faults.retry_after = 0
    texts: list[str] = []
    for key in (KEY, KEY + "-revoked"):
        client = make_client(sim.base_url, key=key)
        for call in (
            lambda c=client: fetch_history_page(c, limit=5),
            lambda c=client: fetch_owners_page(c, BAYC, chain="dogecoin"),
            lambda c=client: c.get_json(f"/api/v2/nft/{BAYC}/owners", {"chain": "solana"}),
        ):
            try:
                call()
            except errors.UpstreamError as exc:
                texts += [str(exc), exc.message, exc.url, repr(exc)]
        texts.append(repr(client.settings))
    assert texts
    for text in [*texts, caplog.text, *map(str, wire.urls)]:
        assert KEY not in text


def test_a_key_echoed_back_by_the_upstream_is_masked() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"message": f"key {request.headers['X-API-Key']} is revoked"})

    client = UpstreamClient("http://upstream.test", _settings(), transport=httpx.MockTransport(echo))
    with pytest.raises(errors.RejectedKey) as caught:
        client.get_json("/history", {"limit": 1})
    assert KEY not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize("transform", [str.upper, str.lower])
def test_a_key_echoed_back_in_another_letter_case_is_masked(transform: Callable[[str], str]) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        key = transform(request.headers["X-API-Key"])
        return httpx.Response(401, json={"message": f"invalid key {key}"})

    client = UpstreamClient("http://upstream.test", _settings(), transport=httpx.MockTransport(echo))
    with pytest.raises(errors.RejectedKey) as caught:
        client.get_json("/history", {"limit": 1})
    assert KEY.lower() not in str(caught.value).lower()
    assert "invalid key ***" in str(caught.value)


def test_a_key_that_cannot_be_a_header_is_refused_without_echoing_it() -> None:
    from dashboard.upstream.client import ClientSettings

    with pytest.raises(errors.InvalidRequest) as caught:
        UpstreamClient("http://upstream.test", ClientSettings(api_key="abc\ndef-secret"))
    assert "def-secret" not in str(caught.value)


def _settings():  # noqa: ANN202
    from dashboard.upstream.client import ClientSettings

    return ClientSettings(api_key=KEY, max_retries=0)
