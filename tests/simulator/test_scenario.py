"""The scripted world (scenario.py): statuses at the start, nothing recorded for streams not active, the
receiver coming back (on schedule and by the control), reactivation then replays, a scripted termination."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import httpx
import pytest

from dashboard.simulator import catalog
from dashboard.simulator.history import Stream
from dashboard.simulator.server import RunningSimulator, serve_in_thread
from dashboard.simulator.world import World
from tests.simulator.conftest import KEY, make_config

MINUTE = 60.0


def stream(world: World, tag: str) -> Stream:
    return next(s for s in world.history.streams if s.tag == tag)


def records_of(world: World, s: Stream) -> list[dict]:
    return [r for r in world.history_records() if r["streamId"] == s.id]


@contextmanager
def served(**overrides: object) -> Iterator[tuple[RunningSimulator, httpx.Client]]:
    with serve_in_thread(make_config(**overrides)) as sim, httpx.Client(
        base_url=sim.base_url, headers={"X-API-Key": KEY}, timeout=10
    ) as http:
        yield sim, http


@pytest.fixture
def eight() -> Iterator[tuple[RunningSimulator, httpx.Client]]:
    with served(streams=8) as pair:
        yield pair


def test_at_the_start_most_streams_are_active_one_in_error_one_paused(http: httpx.Client) -> None:
    streams = {s["tag"]: s for s in http.get("/streams/evm", params={"limit": 100}).json()["result"]}
    assert {tag: s["status"] for tag, s in streams.items()} == {
        "usdc-transfers": "active",
        "nft-sales": "active",
        "treasury-wallets": "error",
        "uniswap-v2-swaps": "active",
        "bsc-usdt-payments": "active",
        "polygon-erc1155-transfers": "paused",
    }
    treasury = streams["treasury-wallets"]
    assert treasury["statusMessage"].startswith("Webhook success rate for https://ingest.treasury-ops.net")
    assert treasury["isErrorSince"] is not None and treasury["isErrorSince"] < http.get(
        "/history", params={"limit": 1}
    ).json()["result"][0]["date"]
    assert streams["polygon-erc1155-transfers"]["statusMessage"] == "Stream paused by the user"


def test_nothing_is_recorded_or_retried_for_a_stream_that_is_not_active(sim: RunningSimulator) -> None:
    world = sim.world
    now = world.clock.timestamp()
    for tag in ("treasury-wallets", "polygon-erc1155-transfers"):
        s = stream(world, tag)
        left = next(t for t in world.streams.transitions(now) if t.stream_id == s.id)
        records = records_of(world, s)
        assert records, "it has history from before"
        assert max(catalog.block_time(s.chain, int(r["tinyPayload"]["block"])) for r in records) < left.at
        # No attempt of any of its deliveries was made once it left `active`: retries stopped there.
        index, lo, hi = world.history.window(now)
        attempts = [a for d in index.deliveries[lo:hi] if d.event.stream.id == s.id
                    for a in world.history.attempts_made(d, now)]
        assert max(a.at for a in attempts) <= left.at
    # Later still, nothing more: the chain went on, the streams did not.
    world.clock.advance(2 * 3600)
    for tag in ("treasury-wallets", "polygon-erc1155-transfers"):
        s = stream(world, tag)
        assert world.streams.status(s, world.clock.timestamp())[0] in ("error", "paused")
        newest = max(r["date"] for r in records_of(world, s))
        assert newest < world.history_records()[0]["date"]
        assert all(r["date"] <= newest for r in records_of(world, s))


def test_the_swaps_slide_toward_error_before_the_provider_acts(sim: RunningSimulator) -> None:
    world = sim.world
    start = world.clock.timestamp()
    swaps = stream(world, "uniswap-v2-swaps")
    url = swaps.webhook.url
    assert world.streams.rate(url, start) >= 98
    five = world.streams.rate(url, start + 5 * MINUTE)
    eight = world.streams.rate(url, start + 8 * MINUTE)
    assert 70 <= eight < five < 98
    assert world.streams.status(swaps, start + 8 * MINUTE)[0] == "active"
    assert world.streams.status(swaps, start + 30 * MINUTE)[0] == "error"
    went = next(t for t in world.streams.transitions(start + 30 * MINUTE) if t.stream_id == swaps.id)
    assert 8 * MINUTE < went.at - start < 25 * MINUTE
    # From then on its blocks are not recorded.
    world.clock.advance(60 * MINUTE)
    dates = [catalog.block_time(swaps.chain, int(r["tinyPayload"]["block"])) for r in records_of(world, swaps)]
    assert max(dates) < went.at


def reactivate_and_replay(sim: RunningSimulator, http: httpx.Client) -> list[dict]:
    """Reactivate the treasury stream and replay its failed deliveries; the replays' answers."""
    world = sim.world
    treasury = stream(world, "treasury-wallets")
    failed = [r for r in records_of(world, treasury) if r["errorMessage"]]
    assert failed
    response = http.post(f"/streams/evm/{treasury.id}/status", json={"status": "active"})
    assert response.status_code == 200 and response.json()["status"] == "active"
    assert response.json()["isErrorSince"] is None
    return [http.post(f"/history/replay/{treasury.id}/{r['id']}").json() for r in failed]


def test_the_receiver_comes_back_on_schedule_then_reactivation_and_replays_deliver(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    treasury = stream(world, "treasury-wallets")
    failed = next(r for r in records_of(world, treasury) if r["errorMessage"])
    # While in error, replays are refused.
    response = http.post(f"/history/replay/{treasury.id}/{failed['id']}")
    assert (response.status_code, response.json()) == (400, {"message": "Stream is in error state"})
    # Four minutes in the receiver is back; the stream stays in error until someone reactivates it.
    world.clock.advance(5 * MINUTE)
    assert world.history.incident_at(treasury.webhook, world.clock.timestamp()) is None
    assert http.get(f"/streams/evm/{treasury.id}").json()["status"] == "error"
    reactivated_at = world.clock.timestamp()
    answers = reactivate_and_replay(sim, http)
    assert answers and all(a["errorMessage"] == "" for a in answers)
    assert all(r["errorMessage"] == "" for r in records_of(world, treasury) if r["id"] in {a["id"] for a in answers})
    # New blocks are delivered again, from the chain's current block on.
    world.clock.advance(2 * 3600)
    new = [r for r in records_of(world, treasury) if r["tinyPayload"]["block"]
           and int(r["tinyPayload"]["block"]) >= catalog.block_at(treasury.chain, reactivated_at)]
    assert new and all(r["errorMessage"] == "" or r["tinyPayload"]["retries"] == 0 for r in new)
    assert http.get(f"/streams/evm/{treasury.id}").json()["status"] == "active"


def test_the_control_brings_the_receiver_back_at_once() -> None:
    with served(receiver_back_after=6 * 3600) as (sim, http):
        world = sim.world
        treasury = stream(world, "treasury-wallets")
        world.clock.advance(MINUTE)
        # Reactivated while the receiver is still down: replays fail (and the stream soon slides back).
        answers = reactivate_and_replay(sim, http)
        assert answers and all(a["errorMessage"].startswith("connect ECONNREFUSED") for a in answers)
        response = http.post("/simulator/receivers/up", json={"streamId": treasury.id})
        assert response.status_code == 200
        assert [r["webhookUrl"] for r in response.json()["receivers"]] == [treasury.webhook.url]
        # Nothing is down on that URL any more.
        assert http.post("/simulator/receivers/up", json={"streamId": treasury.id}).json() == {"receivers": []}
        world.clock.advance(MINUTE)
        if http.get(f"/streams/evm/{treasury.id}").json()["status"] != "active":
            http.post(f"/streams/evm/{treasury.id}/status", json={"status": "active"})
        failed = [r for r in records_of(world, treasury) if r["errorMessage"]]
        assert failed
        for record in failed:
            replayed = http.post(f"/history/replay/{treasury.id}/{record['id']}").json()
            assert replayed["errorMessage"] == ""
        refused = http.post("/simulator/receivers/up", json={"streamId": "nope"})
        assert (refused.status_code, refused.json()) == (400, {"message": "streamId must be a valid UUID"})
        assert http.get("/simulator/receivers/up").status_code == 405


def test_a_scripted_termination_and_nothing_recorded_after_it(eight: tuple[RunningSimulator, httpx.Client]) -> None:
    sim, http = eight
    world = sim.world
    now = world.clock.timestamp()
    mints = stream(world, "arbitrum-mints")
    mine = [t for t in world.streams.transitions(now) if t.stream_id == mints.id]
    assert [t.status for t in mine] == ["error", "terminated"]
    assert mine[1].at - mine[0].at == 24 * 3600
    body = http.get(f"/streams/evm/{mints.id}").json()
    assert body["status"] == "terminated" and body["isErrorSince"] is not None
    world.clock.advance(3600)
    records = records_of(world, mints)
    assert records
    assert max(catalog.block_time(mints.chain, int(r["tinyPayload"]["block"])) for r in records) < mine[0].at
    # Only the scripted termination: the other streams are where the scenario puts them.
    assert sorted(
        world.streams.status(s, world.clock.timestamp())[0] for s in world.history.streams
    ) == ["active", "active", "active", "error", "error", "error", "paused", "terminated"]


def test_a_delivery_is_dated_at_its_first_attempt_seconds_after_its_block_or_its_finality(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    body = http.get("/history", params={"limit": 100}).json()["result"]
    for record in body:
        if not record["tinyPayload"]["block"]:
            continue
        chain = catalog.CHAINS_BY_HEX[record["tinyPayload"]["chainId"]]
        number = int(record["tinyPayload"]["block"])
        mined = catalog.block_time(chain, number)
        assert int(record["payload"]["block"]["timestamp"]) == int(mined)
        date = datetime.fromisoformat(record["date"].replace("Z", "+00:00")).timestamp()
        wait = chain.confirm_seconds if record["tinyPayload"]["confirmed"] else 0.0
        assert 1.0 <= date - mined - wait <= 5.0 + 0.001
