"""GET /history: auth, validation, paging, retries in place, retention, determinism, live mode."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import httpx
import pytest

from dashboard.simulator.history import RETRY_DELAYS
from dashboard.simulator.server import RunningSimulator
from dashboard.simulator.world import World
from tests.simulator.conftest import KEY, START, make_config


def all_pages(http: httpx.Client, limit: int = 100, **extra: str) -> list[dict]:
    records: list[dict] = []
    params: dict[str, object] = {"limit": limit, **extra}
    while True:
        body = http.get("/history", params=params).json()
        records.extend(body["result"])
        if "cursor" not in body:
            return records
        params = {"limit": limit, "cursor": body["cursor"], **extra}


def test_it_requires_a_key(sim: RunningSimulator) -> None:
    response = httpx.get(f"{sim.base_url}/history?limit=5")
    assert response.status_code == 401
    assert response.json() == {"message": "API KEY missing from x-api-key header"}


def test_it_rejects_a_wrong_key(sim: RunningSimulator) -> None:
    response = httpx.get(f"{sim.base_url}/history?limit=5", headers={"X-API-Key": KEY + "x"})
    assert response.status_code == 401
    assert response.json() == {"message": "Token is invalid format"}


@pytest.mark.parametrize(
    "query, message",
    [
        ("", "limit is required"),
        ("limit=0", "limit must not be less than 1"),
        ("limit=101", "limit must not be greater than 100"),
        ("limit=abc", "limit must be an integer number"),
        ("limit=5&limit=6", "limit must be a single value"),
        ("limit=5&excludePayload=maybe", "excludePayload must be a boolean value (true or false)"),
        ("limit=5&cursor=abc.def.ghi", "Invalid cursor"),
        ("limit=5&cursor=%ff%fe", "query string could not be parsed"),
        # Digits of other scripts are not numbers to a JavaScript parser.
        ("limit=%EF%BC%95", "limit must be an integer number"),
        ("limit=%D9%A5", "limit must be an integer number"),
        ("limit=99999999999999999999", "limit must not be greater than 100"),
        ("limit=-99999999999999999999", "limit must not be less than 1"),
    ],
)
def test_it_answers_400_in_the_streams_style(http: httpx.Client, query: str, message: str) -> None:
    response = http.get(f"/history?{query}")
    assert response.status_code == 400
    assert response.json() == {"message": message}


def test_pages_cover_the_window_newest_first_without_overlap(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    truth = sim.world.history_records()
    assert 2000 < len(truth) < 8000, "a demo-sized window"
    records = all_pages(http, excludePayload="true")
    assert [r["id"] for r in records] == [r["id"] for r in truth]
    dates = [r["date"] for r in records]
    assert dates == sorted(dates, reverse=True)
    assert http.get("/history", params={"limit": 1}).json()["total"] == len(truth)
    assert START - timedelta(days=7) <= sim.world.clock.now() - timedelta(days=7)


def test_the_cursor_carries_its_page_size(http: httpx.Client) -> None:
    first = http.get("/history", params={"limit": 7}).json()
    second = http.get("/history", params={"limit": 50, "cursor": first["cursor"]}).json()
    assert len(second["result"]) == 7
    assert second["result"][0]["date"] <= first["result"][-1]["date"]


def test_the_last_page_has_no_cursor(http: httpx.Client) -> None:
    total = http.get("/history", params={"limit": 1}).json()["total"]
    records = all_pages(http, limit=100, excludePayload="true")
    assert len(records) == total


def test_exclude_payload_drops_only_the_payload(http: httpx.Client) -> None:
    full = http.get("/history", params={"limit": 10}).json()["result"]
    slim = http.get("/history", params={"limit": 10, "excludePayload": "true"}).json()["result"]
    assert all("payload" in r for r in full)
    assert [{k: v for k, v in r.items() if k != "payload"} for r in full] == slim


def test_every_block_is_delivered_unconfirmed_and_confirmed(sim: RunningSimulator) -> None:
    records = sim.world.history_records(START - timedelta(hours=1))
    per_block = Counter(
        (r["streamId"], r["tinyPayload"]["block"], r["tinyPayload"]["confirmed"]) for r in records
    )
    blocks = {(s, b) for s, b, _ in per_block}
    both = [b for b in blocks if per_block[(*b, True)] and per_block[(*b, False)]]
    # Only the blocks at the window's edges may miss their twin.
    assert len(both) >= len(blocks) - 10
    assert len({r["streamId"] for r in records}) >= 5
    assert len({r["tinyPayload"]["chainId"] for r in records}) >= 3


def status(record: dict) -> str:
    if not record["errorMessage"]:
        return "delivered"
    return "failed" if record["tinyPayload"]["retries"] >= len(RETRY_DELAYS) else "retrying"


def test_the_demo_shows_a_mix_of_outcomes_and_error_texts(sim: RunningSimulator, http: httpx.Client) -> None:
    records = sim.world.history_records()
    statuses = Counter(status(r) for r in records)
    assert statuses["delivered"] > statuses["failed"] > 0 and statuses["retrying"] > 0
    texts = {r["errorMessage"] for r in records if r["errorMessage"]}
    # What is failing now: the receiver that is down; what failed for good: the rejected payloads.
    assert any(t.startswith("connect ECONNREFUSED ") for t in texts)
    assert "Request failed with status code 413" in texts
    unhealthy = {r["streamId"] for r in records if status(r) == "retrying"}
    assert unhealthy, "some streams are failing right now"
    # Every failure the retries fixed is in the delivery logs: random incidents, blips, the flapping proxy.
    logs = http.get("/history/logs", params={"limit": 100, "deliveryStatus": "failed"}).json()["result"]
    assert len({log["errorMessage"] for log in logs}) >= 4


def test_retries_update_the_same_record_in_place(sim: RunningSimulator) -> None:
    world = sim.world
    # Five minutes in, the swaps' slow receiver has deliveries waiting for their first retry.
    world.clock.advance(300)
    now = world.clock.timestamp()
    active = {s.id for s in world.history.streams if world.streams.status(s, now)[0] == "active"}
    retrying = [
        r for r in world.history_records() if status(r) == "retrying" and r["streamId"] in active
    ]
    assert retrying
    target = retrying[0]
    # Step past the longest remaining retry: the record is delivered, has used up its retries, or its stream
    # left `active` and its schedule stopped there.
    world.clock.advance(sum(RETRY_DELAYS) + 60)
    later = {r["id"]: r for r in world.history_records(include_payload=True)}
    after = later[target["id"]]
    assert after["date"] == target["date"]
    assert after["tinyPayload"]["retries"] > target["tinyPayload"]["retries"]
    assert after["payload"]["retries"] == after["tinyPayload"]["retries"]
    stream = world.streams.by_id[target["streamId"]]
    assert (
        after["errorMessage"] == ""
        or after["tinyPayload"]["retries"] == len(RETRY_DELAYS)
        or world.streams.status(stream, world.clock.timestamp())[0] != "active"
    )
    assert world.clock.timestamp() > now


def test_records_leave_after_the_retention_window(sim: RunningSimulator) -> None:
    world = sim.world
    oldest = world.history_records()[-1]
    world.clock.advance(3600)
    assert oldest["id"] not in {r["id"] for r in world.history_records()}
    newest_date = max(r["date"] for r in world.history_records())
    assert newest_date > oldest["date"]


def test_live_mode_adds_deliveries_as_the_clock_runs(sim: RunningSimulator, http: httpx.Client) -> None:
    before = http.get("/history", params={"limit": 100, "excludePayload": "true"}).json()["result"]
    sim.world.clock.advance(2 * 3600)
    after = http.get("/history", params={"limit": 100, "excludePayload": "true"}).json()["result"]
    new = {r["id"] for r in after} - {r["id"] for r in before}
    assert len(new) > 10
    assert after[0]["date"] > before[0]["date"]


def test_the_same_seed_gives_the_same_world_and_another_seed_another() -> None:
    one = World(make_config()).history_records(include_payload=True)
    two = World(make_config()).history_records(include_payload=True)
    other = World(make_config(seed=12)).history_records()
    assert one == two
    assert {r["id"] for r in other}.isdisjoint({r["id"] for r in one})


def test_a_restart_with_the_same_seed_serves_the_same_records_under_the_same_ids() -> None:
    # A dashboard that polled before the restart must find the records it has, not look-alikes. The restart
    # passes its first start as the scenario's anchor, as the demo's launcher does.
    before = World(make_config())
    after = World(make_config(start=START + timedelta(minutes=45), scenario_start=START))
    now = START + timedelta(minutes=45)

    def identity(world: World) -> dict[str, tuple]:
        return {
            r["id"]: (r["date"], r["streamId"], r["tag"], r["tinyPayload"]["block"], r["payload"]["txs"])
            for r in world.history_records(now, include_payload=True)
        }

    old, new = identity(before), identity(after)
    assert len(old) > 1000 and old == new


def test_a_restart_anchored_at_the_first_start_changes_no_record_already_served() -> None:
    # The scripted incidents hang off the first start; without the anchor a later restart would move them
    # and rewrite errorMessage and retries of records a dashboard has already stored.
    restarted_at = START + timedelta(minutes=45)
    before = World(make_config())
    after = World(make_config(start=restarted_at, scenario_start=START))
    drifted = World(make_config(start=restarted_at))

    def served(world: World) -> dict[str, tuple]:
        return {
            r["id"]: (r["errorMessage"], r["tinyPayload"]["retries"], r["tinyPayload"]["confirmed"])
            for r in world.history_records(restarted_at)
        }

    assert served(after) == served(before)
    assert served(drifted) != served(before)


def test_a_page_with_payloads_is_served_fast(sim: RunningSimulator, http: httpx.Client) -> None:
    http.get("/history", params={"limit": 100})  # warms the payload cache and the connection
    cursor = http.get("/history", params={"limit": 100}).json()["cursor"]
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        body = http.get("/history", params={"limit": 100, "cursor": cursor}).json()
        timings.append(time.perf_counter() - started)
        cursor = body["cursor"]
    assert len(body["result"]) == 100
    assert sorted(timings)[2] < 0.1, timings
