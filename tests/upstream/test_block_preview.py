"""The block preview and what it is built from (a stream's configuration and addresses), against the simulator."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from dashboard.simulator import catalog, truth
from dashboard.simulator.server import RunningSimulator
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.streams import (
    BlockPreview,
    Stream,
    StreamConfig,
    fetch_addresses_page,
    fetch_all_streams,
    fetch_stream_addresses,
    preview_block,
)
from tests.upstream.conftest import Recording, Sleeps

MakeClient = Callable[..., UpstreamClient]
HOUR = 3600.0


def by_tag(client: UpstreamClient, tag: str) -> Stream:
    return next(s for s in fetch_all_streams(client) if s.tag == tag)


def full_config(client: UpstreamClient, stream: Stream) -> StreamConfig:
    return stream.config.with_addresses(fetch_stream_addresses(client, stream.id))


def test_a_streams_configuration_is_read_from_the_listing_and_its_addresses() -> None:
    stream = Stream.parse({
        "id": "7b8f1c1e-2a4b-4c8d-9e0f-1a2b3c4d5e6f", "tag": "t", "topic0": ["Transfer(address,address,uint256)", 7],
        "includeNativeTxs": "true", "abi": [{"type": "event"}], "triggers": None, "surprise": 1,
    })
    config = stream.config.with_addresses([" 0xABC0000000000000000000000000000000000001 "])
    assert config.topic0 == ("Transfer(address,address,uint256)", "7") and config.include_native_txs
    assert not config.all_addresses and not config.include_internal_txs
    body = config.as_body()
    assert body["addresses"] == ["0xabc0000000000000000000000000000000000001"]
    assert body["abi"] == [{"type": "event"}] and body["getNativeBalances"] == [] and body["tag"] == "t"
    assert StreamConfig.parse({}).as_body()["topic0"] == []


def test_addresses_are_paged(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    swaps = by_tag(client, "uniswap-v2-swaps")
    first = fetch_addresses_page(client, swaps.id, limit=3)
    assert len(first.addresses) == 3 and first.total == 4 and first.cursor
    everything = fetch_stream_addresses(client, swaps.id)
    assert everything[:3] == first.addresses and len(set(everything)) == 4
    assert all(a == a.lower() and a.startswith("0x") for a in everything)
    with pytest.raises(errors.NotFound):
        fetch_stream_addresses(client, "7b8f1c1e-2a4b-4c8d-9e0f-1a2b3c4d5e6f")
    with pytest.raises(errors.InvalidRequest):
        fetch_stream_addresses(client, "../stats")


def test_a_preview_of_a_delivered_block_is_what_the_stream_received(
    sim: RunningSimulator, make_client: MakeClient
) -> None:
    client = make_client(sim.base_url)
    usdc = by_tag(client, "usdc-transfers")
    record = next(
        r for r in sim.world.history_records(include_payload=True)
        if r["streamId"] == usdc.id and r["tinyPayload"]["confirmed"]
    )
    number = int(record["tinyPayload"]["block"])
    preview = preview_block(client, "eth", number, full_config(client, usdc))
    assert isinstance(preview, BlockPreview)
    assert preview.chain_id == "0x1" and preview.block_number == number and preview.confirmed is True
    assert preview.block_hash == record["payload"]["block"]["hash"]
    mined = int(record["payload"]["block"]["timestamp"])
    assert preview.block_timestamp == datetime.fromtimestamp(mined, UTC)
    assert preview.logs == len(record["payload"]["logs"]) and preview.txs == len(record["payload"]["txs"])
    assert preview.records == record["tinyPayload"]["records"]
    assert preview.payload["logs"] == record["payload"]["logs"]


def test_a_missed_block_previews_and_a_quiet_one_is_none(sim: RunningSimulator, make_client: MakeClient) -> None:
    world = sim.world
    now = world.clock.timestamp()
    client = make_client(sim.base_url)
    treasury = by_tag(client, "treasury-wallets")
    missed = next(b for b in truth.matching_blocks(world, now - 6 * HOUR, now) if b.stream_id == treasury.id
                  and b.missed)
    found = preview_block(client, treasury.chain_ids[0], missed.number, full_config(client, treasury))
    assert found is not None and found.txs >= 1 and found.block_number == missed.number
    quiet_stream = by_tag(client, "bsc-usdt-payments")
    simulated = world.streams.stream(quiet_stream.id)
    assert simulated is not None
    start, end = truth.quiet_hours(world, simulated, now, now)[-1]
    number = catalog.block_at(simulated.chain, start) + 5
    assert preview_block(client, "0x38", number, full_config(client, quiet_stream)) is None


def test_bad_blocks_are_refused_before_or_by_the_provider(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    config = StreamConfig.parse({})
    with pytest.raises(errors.InvalidRequest):
        preview_block(client, "0x999", 1, config)
    with pytest.raises(errors.InvalidRequest):
        preview_block(client, "0x1", -1, config)
    head = catalog.block_at(catalog.CHAINS_BY_HEX["0x1"], sim.world.clock.timestamp())
    with pytest.raises(errors.BadRequest, match=f"Block {head + 10} is beyond the current head") as raised:
        preview_block(client, "0x1", head + 10, config)
    assert not raised.value.transient


def test_a_rate_limited_preview_is_retried_then_raised_with_its_retry_after(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps, wire: Recording
) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 2
    client = make_client(sim.base_url, max_retries=2)
    with pytest.raises(errors.RateLimited) as raised:
        preview_block(client, "0x1", 100, StreamConfig.parse({}))
    assert raised.value.retry_after == 2 and raised.value.transient
    assert len(wire.urls) == 3 and len(sleeps.delays) == 2 and all(d >= 2 for d in sleeps.delays)
    # Lifted while the client waits: the next try is answered.
    sim.world.faults.rate_429 = 1.0
    sleeps.on_sleep = lambda: setattr(sim.world.faults, "rate_429", 0.0)
    assert preview_block(client, "0x1", 100, StreamConfig.parse({})) is None


def test_a_preview_whose_answer_is_lost_is_asked_again(
    sim: RunningSimulator, make_client: MakeClient, sleeps: Sleeps
) -> None:
    sim.world.faults.truncate_rate = 1.0
    sim.world.faults.truncate_mode = "body"
    sleeps.on_sleep = lambda: setattr(sim.world.faults, "truncate_rate", 0.0)
    client = make_client(sim.base_url)
    assert preview_block(client, "0x1", 100, StreamConfig.parse({})) is None
    assert len(sleeps.delays) == 1
