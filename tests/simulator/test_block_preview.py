"""The block preview (contract §5) and the streams' configurations it is built from: a stream's own
configuration previews exactly what the stream received for a block, or would have received while it was not
`active` or during an address reload; a quiet hour's blocks preview null; bad requests are 400s."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dashboard.simulator import catalog, truth
from dashboard.simulator.history import Stream
from dashboard.simulator.server import RunningSimulator
from dashboard.simulator.world import World
from tests.simulator import schemas
from tests.simulator.test_conformance import errors_of

HOUR = 3600.0
CONFIG_KEYS = (
    "tag", "topic0", "abi", "allAddresses", "includeNativeTxs", "includeContractLogs", "includeInternalTxs",
    "includeAllTxLogs", "advancedOptions", "getNativeBalances", "triggers",
)
ADDRESSES = schemas.operation_validator("streams.json", "/streams/evm/{id}/address", "get")
PAYLOAD = schemas.validator("streams.json", "webhookTypes.IWebhookUnParsed")


def stream(world: World, tag: str) -> Stream:
    return next(s for s in world.history.streams if s.tag == tag)


def preview_body(http: httpx.Client, stream_id: str) -> dict[str, Any]:
    """A preview's body built from what a client reads: the stream and its addresses."""
    listed = http.get(f"/streams/evm/{stream_id}").json()
    addresses = http.get(f"/streams/evm/{stream_id}/address", params={"limit": 100}).json()["result"]
    return {**{key: listed[key] for key in CONFIG_KEYS}, "addresses": [a["address"] for a in addresses]}


def preview(http: httpx.Client, chain: str, number: int, body: object) -> httpx.Response:
    return http.post(f"/streams/evm/{chain}/block/{number}", json=body)


def same_delivery(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload without what differs between the deliveries of one block and its preview."""
    return {**payload, "retries": 0, "confirmed": None, "streamId": ""}


def records_of_block(world: World, s: Stream, number: int) -> list[dict[str, Any]]:
    return [
        r for r in world.history_records(include_payload=True)
        if r["streamId"] == s.id and r["tinyPayload"]["block"] == str(number)
    ]


def test_streams_show_their_configuration_and_their_addresses(sim: RunningSimulator, http: httpx.Client) -> None:
    listed = http.get("/streams/evm", params={"limit": 100}).json()["result"]
    by_tag = {s["tag"]: s for s in listed}
    assert by_tag["usdc-transfers"]["topic0"] == ["Transfer(address,address,uint256)", "Approval(address,address,uint256)"]
    assert [e["name"] for e in by_tag["usdc-transfers"]["abi"] if e["type"] == "event"] == ["Transfer", "Approval"]
    assert by_tag["treasury-wallets"]["includeNativeTxs"] and by_tag["treasury-wallets"]["topic0"] is None
    swaps = by_tag["uniswap-v2-swaps"]["id"]
    first = http.get(f"/streams/evm/{swaps}/address", params={"limit": 2}).json()
    assert errors_of(ADDRESSES, first) == [] and first["total"] == 4 and first["cursor"]
    rest = http.get(f"/streams/evm/{swaps}/address", params={"limit": 2, "cursor": first["cursor"]}).json()
    assert errors_of(ADDRESSES, rest) == [] and "cursor" not in rest
    assert len({a["address"] for a in first["result"] + rest["result"]}) == 4
    assert http.get(f"/streams/evm/{swaps}/address").status_code == 400
    other = by_tag["usdc-transfers"]["id"]
    refused = http.get(f"/streams/evm/{other}/address", params={"limit": 2, "cursor": first["cursor"]})
    assert (refused.status_code, refused.json()) == (400, {"message": "Invalid cursor"})
    unknown = http.get("/streams/evm/4f1b8bb8-5e5a-4c71-9d5e-2b7c8f0b6a11/address", params={"limit": 5})
    assert (unknown.status_code, unknown.json()) == (404, {"message": "Stream not found"})


def test_a_preview_equals_what_the_stream_received_for_a_block_it_delivered(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    now = world.clock.timestamp()
    blocks = truth.matching_blocks(world, now - 12 * HOUR, now)
    compared = set()
    for block in blocks:
        if block.tag in compared or not all(d.fate == truth.RECORDED for d in block.deliveries):
            continue
        s = world.streams.stream(block.stream_id)
        assert s is not None
        answer = preview(http, block.chain_id, block.number, preview_body(http, s.id))
        assert answer.status_code == 200
        body = answer.json()
        records = records_of_block(world, s, block.number)
        assert len(records) == 2
        for record in records:
            assert same_delivery(body) == same_delivery(record["payload"])
        assert body["streamId"] == "" and body["retries"] == 0 and body["tag"] == s.tag
        # Both deliveries are recorded, so the block has reached its finality.
        assert body["confirmed"] is True
        without_extras = schemas.without_payload_extras({"result": [{"payload": body}]})["result"][0]["payload"]
        assert errors_of(PAYLOAD, without_extras) == []
        compared.add(block.tag)
    # Every kind of stream the scenario keeps delivering: transfers, sales, native transfers, swaps.
    assert {"usdc-transfers", "nft-sales", "treasury-wallets", "uniswap-v2-swaps", "bsc-usdt-payments"} <= compared


def test_a_block_missed_while_the_stream_was_in_error_previews_what_it_would_have_received(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    now = world.clock.timestamp()
    treasury = stream(world, "treasury-wallets")
    went = next(t for t in world.streams.transitions(now) if t.stream_id == treasury.id and t.status == "error")
    missed = [b for b in truth.matching_blocks(world, went.at, now, stream=treasury) if b.missed]
    assert len(missed) >= 3 and all(d.fate == truth.NOT_ACTIVE for b in missed for d in b.deliveries)
    body = preview_body(http, treasury.id)
    for block in missed[:3]:
        answer = preview(http, block.chain_id, block.number, body).json()
        assert answer is not None and answer["block"]["number"] == str(block.number)
        assert answer["txs"] and all(
            body["addresses"][0] in (tx["fromAddress"], tx["toAddress"]) for tx in answer["txs"]
        )
        assert records_of_block(world, treasury, block.number) == []


def test_blocks_missed_by_an_address_reload_preview_while_the_stream_stayed_active(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    now = world.clock.timestamp()
    [(swaps, start, end)] = truth.reloads(world)
    assert swaps.tag == "uniswap-v2-swaps" and end <= now
    assert world.streams.status(swaps, start)[0] == "active" and world.streams.status(swaps, end)[0] == "active"
    dropped = [b for b in truth.matching_blocks(world, start, end, stream=swaps) if b.missed]
    assert 3 <= len(dropped) <= 8 and all(d.fate == truth.RELOAD for b in dropped for d in b.deliveries)
    body = preview_body(http, swaps.id)
    # The pair whose adding started the reload is among the addresses.
    assert "0x3041cbd36888becc7bbcbc0045e3b1f144466f5f" in body["addresses"]
    for block in dropped:
        answer = preview(http, block.chain_id, block.number, body).json()
        assert answer is not None and answer["logs"]
        assert records_of_block(world, swaps, block.number) == []
    # The blocks around it were delivered.
    around = truth.matching_blocks(world, start - 120, end + 60, stream=swaps)
    assert any(b.recorded for b in around if b.mined_at < start)
    assert any(b.recorded for b in around if b.mined_at >= end)


def test_a_quiet_hour_previews_null_and_is_not_an_outage(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    now = world.clock.timestamp()
    quiet = stream(world, "bsc-usdt-payments")
    hours = truth.quiet_hours(world, quiet, now - 7 * 24 * HOUR, now)
    # The scripted hour (under way at the start) and some drawn from the seed.
    assert len(hours) >= 2 and hours[-1][0] < now < hours[-1][1]
    start, end = hours[-2]
    assert world.streams.status(quiet, start)[0] == "active" and world.streams.status(quiet, end)[0] == "active"
    assert truth.matching_blocks(world, start, end, stream=quiet) == []
    body = preview_body(http, quiet.id)
    first, last = catalog.block_at(quiet.chain, start) + 1, catalog.block_at(quiet.chain, end) - 1
    for number in range(first, last + 1, (last - first) // 10):
        assert preview(http, quiet.chain.hex_id, number, body).json() is None
    # Outside its quiet hours the same configuration does get blocks.
    before = [b for b in truth.matching_blocks(world, start - 12 * HOUR, start, stream=quiet) if b.recorded]
    assert before and preview(http, quiet.chain.hex_id, before[-1].number, body).json() is not None


def test_a_configuration_gets_only_what_it_matches(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    now = world.clock.timestamp()
    sales = stream(world, "nft-sales")
    block = next(
        b for b in reversed(truth.matching_blocks(world, now - 24 * HOUR, now, stream=sales)) if b.recorded
    )
    body = preview_body(http, sales.id)
    whole = preview(http, "0x1", block.number, body).json()
    # Only Seaport's events: the order logs, their transactions, no transfer list.
    seaport = preview(http, "eth", block.number, {**body, "addresses": ["0x00000000000000ADc04C56Bf30aC9d3c0aAF14dC"],
                                                   "unknown": {"ignored": True}}).json()
    assert seaport["logs"] and len(seaport["logs"]) < len(whole["logs"])
    assert {log["address"] for log in seaport["logs"]} == {"0x00000000000000adc04c56bf30ac9d3c0aaf14dc"}
    assert seaport["nftTransfers"] == [] and seaport["txs"] == whole["txs"]
    # A hash for a signature, any address with allAddresses.
    hashed = [log["topic0"] for log in whole["logs"]]
    anywhere = preview(http, "0x1", block.number, {"topic0": hashed, "allAddresses": True}).json()
    assert {log["logIndex"] for log in anywhere["logs"]} >= {log["logIndex"] for log in whole["logs"]}
    # Nothing to match: null.
    assert preview(http, "0x1", block.number, {**body, "topic0": ["Deposit(address,uint256)"]}).json() is None
    assert preview(http, "0x1", block.number, {}).json() is None
    assert preview(http, "0xa4b1", 200_000_000, body).json() is None


def test_a_preview_sends_and_records_nothing(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    now = world.clock.timestamp()
    treasury = stream(world, "treasury-wallets")
    missed = next(b for b in truth.matching_blocks(world, now - 6 * HOUR, now, stream=treasury) if b.missed)
    history = http.get("/history", params={"limit": 1}).json()
    stats = http.get("/stats").json()
    logs = http.get("/history/logs", params={"limit": 1}).json()["total"]
    for _ in range(3):
        assert preview(http, missed.chain_id, missed.number, preview_body(http, treasury.id)).json() is not None
    assert http.get("/history", params={"limit": 1}).json() == history
    assert http.get("/stats").json() == stats
    assert http.get("/history/logs", params={"limit": 1}).json()["total"] == logs


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/streams/evm/0x999/block/100", {}, "Invalid chain provided"),
        ("/streams/evm/0x1/block/12x", {}, "blockNumber must be a positive integer"),
        ("/streams/evm/0x1/block/-5", {}, "blockNumber must be a positive integer"),
        ("/streams/evm/0x1/block/100", [1, 2], "The body must be a stream configuration (a JSON object)"),
        ("/streams/evm/0x1/block/100", {"topic0": "Transfer(address,address,uint256)"},
         "topic0 must be an array of strings"),
        ("/streams/evm/0x1/block/100", {"addresses": ["0x12"]},
         "each value in addresses must be an address (0x and 40 hex digits)"),
        ("/streams/evm/0x1/block/100", {"allAddresses": "yes"}, "allAddresses must be a boolean value"),
    ],
)
def test_malformed_requests_are_400s(http: httpx.Client, path: str, body: object, message: str) -> None:
    response = http.post(path, json=body)
    assert (response.status_code, response.json()) == (400, {"message": message})


def test_a_block_beyond_the_head_is_a_400_that_says_so(sim: RunningSimulator, http: httpx.Client) -> None:
    head = catalog.block_at(catalog.CHAINS_BY_HEX["0x1"], sim.world.clock.timestamp())
    assert http.post(f"/streams/evm/0x1/block/{head}", json={}).status_code == 200
    response = http.post(f"/streams/evm/0x1/block/{head + 1}", json={})
    assert response.status_code == 400
    assert response.json() == {"message": f"Block {head + 1} is beyond the current head of chain 0x1 ({head})"}
    assert http.post("/streams/evm/0x1/block/100", content=b"{not json").json() == {"message": "Invalid JSON body"}
    assert http.get("/streams/evm/0x1/block/100").status_code == 405


def test_the_preview_needs_the_key_and_is_rate_limited_like_everything_else(sim: RunningSimulator) -> None:
    with httpx.Client(base_url=sim.base_url, timeout=10) as anonymous:
        assert anonymous.post("/streams/evm/0x1/block/100", json={}).status_code == 401
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 3
    with httpx.Client(base_url=sim.base_url, headers={"X-API-Key": "sim-test-key-5f2c"}, timeout=10) as http:
        response = http.post("/streams/evm/0x1/block/100", json={})
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.json() == {"message": "Rate limit exceeded"}


def test_a_missed_block_resent_is_a_new_delivery_with_what_the_preview_shows(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    world.clock.advance(10 * 60)
    now = world.clock.timestamp()
    [(swaps, start, end)] = truth.reloads(world)
    block = next(b for b in truth.matching_blocks(world, start, end, stream=swaps) if b.missed)
    shown = preview(http, block.chain_id, block.number, preview_body(http, swaps.id)).json()
    total = http.get("/history", params={"limit": 1}).json()["total"]
    sent = http.post(f"/streams/evm/{block.chain_id}/block-to-webhook/{block.number}/{swaps.id}")
    assert sent.status_code == 200
    assert same_delivery(sent.json()) == same_delivery(shown)
    newest = http.get("/history", params={"limit": 1}).json()
    assert newest["total"] == total + 1
    record = newest["result"][0]
    assert record["id"] not in {d.id for d in block.deliveries}
    assert record["tinyPayload"]["block"] == str(block.number) and record["streamId"] == swaps.id
    assert record["date"] == sim.world.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert same_delivery(record["payload"]) == same_delivery(shown)
    # Its attempt is logged like any other.
    log = http.get("/history/logs", params={"limit": 1, "streamId": swaps.id}).json()["result"][0]
    assert log["blockNumber"] == block.number and log["createdAt"] == record["date"]
    # A block in which the stream matched nothing is delivered with nothing in it.
    quiet = stream(world, "bsc-usdt-payments")
    start, end = truth.quiet_hours(world, quiet, now - HOUR, now)[-1]
    number = catalog.block_at(quiet.chain, start) + 10
    empty = http.post(f"/streams/evm/{quiet.chain.hex_id}/block-to-webhook/{number}/{quiet.id}").json()
    assert empty["block"]["number"] == str(number) and empty["logs"] == [] and empty["txs"] == []
