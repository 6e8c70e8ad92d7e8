"""Streams, statuses, stats, logs and replays: consistent with the history the simulator serves."""

from __future__ import annotations

from collections import Counter

import httpx

from dashboard.simulator.history import RETRY_DELAYS
from dashboard.simulator.server import RunningSimulator, serve_in_thread
from dashboard.simulator.streams import ERROR_THRESHOLD, TERMINATE_AFTER
from dashboard.simulator.world import World
from tests.simulator.conftest import KEY, make_config


def every_attempt(world: World) -> list[tuple[float, str, str]]:
    """(time, webhook URL, error) of every attempt of every record in the window, in time order, read
    straight off the history: the streams were created at the start of the first window."""
    now = world.clock.timestamp()
    index, lo, hi = world.history.window(now)
    out = [
        (a.at, d.id, d.event.stream.webhook.url, a.error)
        for d in index.deliveries[lo:hi]
        for a in world.history.attempts_made(d, now)
    ]
    return [(at, url, error) for at, _, url, error in sorted(out)]


def test_a_failing_url_puts_its_streams_in_error_at_the_attempt_that_takes_it_below_70(
    sim: RunningSimulator,
) -> None:
    world = sim.world
    now = world.clock.timestamp()
    rates: dict[str, int] = {}
    first_error: dict[str, float] = {}
    for at, url, error in every_attempt(world):
        rate = rates.get(url, 100)
        rate = max(0, rate - 1) if error else min(100, rate + 1)
        rates[url] = rate
        if rate < ERROR_THRESHOLD and url not in first_error:
            first_error[url] = at
    assert first_error, "the scripted incidents take some URL below 70"
    transitions = world.streams.transitions(now)
    for stream in world.history.streams:
        url = stream.webhook.url
        # The scripted pauses are the owner's, not the rule's.
        mine = [t for t in transitions if t.stream_id == stream.id and t.status != "paused"]
        if url not in first_error:
            assert mine == [] and world.streams.status(stream, now)[0] in ("active", "paused")
            continue
        if world.streams.status(stream, now)[0] == "paused":
            continue
        assert mine[0].status == "error" and mine[0].at == first_error[url]
        assert mine[0].rate == ERROR_THRESHOLD - 1
        if mine[0].at + TERMINATE_AFTER <= now:
            assert mine[1].status == "terminated" and mine[1].at == mine[0].at + TERMINATE_AFTER
    assert {world.streams.rate(url, now) for url in rates} <= set(range(101))
    assert {url: world.streams.rate(url, now) for url in rates} == rates


def test_streams_answer_their_status_and_why(sim: RunningSimulator, http: httpx.Client) -> None:
    body = http.get("/streams/evm", params={"limit": 100}).json()
    by_status = Counter(s["status"] for s in body["result"])
    assert by_status == {"active": 4, "error": 1, "paused": 1}, by_status
    for stream in body["result"]:
        assert stream["statusMessage"]
        assert (stream["isErrorSince"] is not None) == (stream["status"] == "error")
        one = http.get(f"/streams/evm/{stream['id']}").json()
        assert one == stream
    records = http.get("/history", params={"limit": 100, "excludePayload": "true"}).json()["result"]
    streams = {s["id"]: s for s in body["result"]}
    for record in records:
        assert streams[record["streamId"]]["tag"] == record["tag"]
        assert streams[record["streamId"]]["webhookUrl"] == record["webhookUrl"]
        assert record["tinyPayload"]["chainId"] in streams[record["streamId"]]["chainIds"]


def test_stats_equal_the_attempts_made(sim: RunningSimulator, http: httpx.Client) -> None:
    attempts = every_attempt(sim.world)
    project = http.get("/stats").json()
    assert project["totalWebhooksDelivered"] == sum(1 for a in attempts if not a[2])
    assert project["totalWebhooksFailed"] == sum(1 for a in attempts if a[2])
    assert (
        project["totalWebhooksDelivered"] + project["totalWebhooksFailed"]
        == (http.get("/history/logs", params={"limit": 1}).json()["total"])
    )
    for entry in project["streams"]:
        one = http.get(f"/stats/{entry['streamId']}").json()
        assert {k: v for k, v in one.items() if k not in ("createdAt", "updatedAt")} == {
            k: v for k, v in entry.items() if k != "streamId"
        }
    # Later attempts are counted too, and counts never go down when history leaves the window.
    sim.world.clock.advance(9 * 86400)
    later = http.get("/stats").json()
    assert later["totalWebhooksDelivered"] > project["totalWebhooksDelivered"]
    assert later["totalWebhooksFailed"] >= project["totalWebhooksFailed"]


def test_there_is_a_log_for_every_attempt_of_every_record(sim: RunningSimulator, http: httpx.Client) -> None:
    logs: list[dict] = []
    params: dict[str, object] = {"limit": 100}
    while True:
        body = http.get("/history/logs", params=params).json()
        logs.extend(body["result"])
        if "cursor" not in body:
            break
        params = {"limit": 100, "cursor": body["cursor"]}
    assert len(logs) == body["total"] == len({log["id"] for log in logs})
    assert [log["createdAt"] for log in logs] == sorted((log["createdAt"] for log in logs), reverse=True)
    # Each record's latest attempt is the log with its stream, chain, block and retry count.
    latest = {}
    for log in reversed(logs):
        latest[(log["streamId"], log["chain"], log["blockNumber"], log["retries"])] = log
    for record in sim.world.history_records()[:300]:
        key = (
            record["streamId"],
            record["tinyPayload"]["chainId"],
            int(record["tinyPayload"]["block"]),
            record["tinyPayload"]["retries"],
        )
        assert key in latest
    failed = http.get("/history/logs", params={"limit": 100, "deliveryStatus": "failed"}).json()
    assert failed["result"] and all(
        log["deliveryStatus"] == "failed" and log["errorMessage"] for log in failed["result"]
    )


def test_a_replay_is_a_new_attempt_that_shows_in_history(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    # Past the incidents ongoing at the start, so that some receivers are healthy again.
    world.clock.advance(20 * 60)
    now = world.clock.timestamp()
    healthy = {
        s.id
        for s in world.history.streams
        if world.streams.status(s, now)[0] == "active" and world.history.incident_at(s.webhook, now) is None
    }
    record = next(r for r in world.history_records() if r["errorMessage"] and r["streamId"] in healthy)
    before = http.get("/stats").json()
    response = http.post(f"/history/replay/{record['streamId']}/{record['id']}")
    assert response.status_code == 200
    replayed = response.json()
    assert replayed["id"] == record["id"] and replayed["errorMessage"] == ""
    assert replayed["tinyPayload"]["retries"] == record["tinyPayload"]["retries"]
    seen = {r["id"]: r for r in world.history_records()}[record["id"]]
    assert seen["errorMessage"] == "" and seen["tinyPayload"]["retries"] == record["tinyPayload"]["retries"]
    after = http.get("/stats").json()
    assert after["totalWebhooksDelivered"] == before["totalWebhooksDelivered"] + 1
    assert after["totalWebhooksFailed"] == before["totalWebhooksFailed"]
    newest = http.get("/history/logs", params={"limit": 1}).json()["result"][0]
    assert newest["deliveryStatus"] == "success" and newest["streamId"] == record["streamId"]
    assert newest["blockNumber"] == int(record["tinyPayload"]["block"])
    # A delivered record has no retries left to make, whatever its schedule said.
    world.clock.advance(sum(RETRY_DELAYS) + 60)
    assert {r["id"]: r for r in world.history_records()}.get(record["id"], seen)["errorMessage"] == ""


def test_a_replay_is_refused_for_a_stream_in_error_and_for_unknown_records(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    world = sim.world
    now = world.clock.timestamp()
    failing = {
        s.id for s in world.history.streams if world.streams.status(s, now)[0] in ("error", "terminated")
    }
    record = next(r for r in world.history_records() if r["streamId"] in failing)
    response = http.post(f"/history/replay/{record['streamId']}/{record['id']}")
    assert (response.status_code, response.json()) == (400, {"message": "Stream is in error state"})
    other = next(s.id for s in world.history.streams if s.id != record["streamId"])
    response = http.post(f"/history/replay/{other}/{record['id']}")
    assert (response.status_code, response.json()) == (404, {"message": "History not found"})
    response = http.post(f"/history/replay/{other}/not-a-uuid")
    assert (response.status_code, response.json()) == (400, {"message": "id must be a valid UUID"})
    assert http.get(f"/history/replay/{other}/{record['id']}").status_code == 405


def test_a_stream_in_error_can_be_made_active_again(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    first = next(t for t in world.streams.transitions(world.clock.timestamp()) if t.status == "error")
    stream = world.streams.by_id[first.stream_id]
    # Back to an hour after it went into error (the ledger walks again from the start).
    world.clock.advance(first.at + 3600 - world.clock.timestamp())
    assert http.get(f"/streams/evm/{stream.id}").json()["status"] == "error"
    response = http.post(f"/streams/evm/{stream.id}/status", json={"status": "active"})
    assert response.status_code == 200 and response.json()["status"] == "active"
    assert http.get(f"/streams/evm/{stream.id}").json()["status"] == "active"
    # The rate restarts at 100; the reactivation's test webhook is the first attempt after it (contract §4).
    tests = [d for d in world.history.extras if d.test and d.event.stream.id == stream.id]
    assert len(tests) == 1
    failed = bool(world.history.attempts(tests[0])[0][1])
    assert world.streams.rate(stream.webhook.url, world.clock.timestamp()) == (99 if failed else 100)
    records = http.get("/history", params={"limit": 100}).json()["result"]
    test_record = next(r for r in records if r["id"] == tests[0].id)
    assert test_record["tinyPayload"]["chainId"] == "" and test_record["tinyPayload"]["block"] == ""
    for status, message in [
        ("error", "Status error can only be set by the system"),
        ("terminated", "Status terminated can only be set by the system"),
        ("sleeping", "status must be one of the following values: active, paused, error, terminated"),
    ]:
        response = http.post(f"/streams/evm/{stream.id}/status", json={"status": status})
        assert (response.status_code, response.json()) == (400, {"message": message})
    paused = http.post(f"/streams/evm/{stream.id}/status", json={"status": "paused"}).json()
    assert paused["status"] == "paused"


def test_a_terminated_stream_cannot_be_brought_back() -> None:
    # With eight streams the scenario has one terminated (scenario.py: arbitrum-mints).
    with serve_in_thread(make_config(streams=8)) as sim, httpx.Client(
        base_url=sim.base_url, headers={"X-API-Key": KEY}, timeout=10
    ) as http:
        now = sim.world.clock.timestamp()
        gone = next(s for s in sim.world.history.streams if sim.world.streams.status(s, now)[0] == "terminated")
        response = http.post(f"/streams/evm/{gone.id}/status", json={"status": "active"})
        assert (response.status_code, response.json()) == (
            400,
            {"message": "Stream is terminated and cannot be updated"},
        )
        record = next(r for r in sim.world.history_records() if r["streamId"] == gone.id)
        response = http.post(f"/history/replay/{gone.id}/{record['id']}")
        assert (response.status_code, response.json()) == (400, {"message": "Stream is terminated"})


def test_a_resent_block_is_a_new_delivery_in_history(sim: RunningSimulator, http: httpx.Client) -> None:
    world = sim.world
    now = world.clock.timestamp()
    stream = next(s for s in world.history.streams if world.streams.status(s, now)[0] == "active")
    total = http.get("/history", params={"limit": 1}).json()["total"]
    response = http.post(f"/streams/evm/{stream.chain.hex_id}/block-to-webhook/21000000/{stream.id}")
    assert response.status_code == 200
    newest = http.get("/history", params={"limit": 1}).json()
    assert newest["total"] == total + 1
    assert newest["result"][0]["tinyPayload"]["block"] == "21000000"
    assert newest["result"][0]["streamId"] == stream.id
    wrong_chain = "0x38" if stream.chain.hex_id != "0x38" else "0x1"
    response = http.post(f"/streams/evm/{wrong_chain}/block-to-webhook/21000000/{stream.id}")
    assert response.status_code == 400


def test_streams_stats_and_logs_need_the_key_and_are_deterministic(sim: RunningSimulator) -> None:
    for path in ("/streams/evm?limit=5", "/stats", "/history/logs?limit=5"):
        assert httpx.get(f"{sim.base_url}{path}").status_code == 401
    one, two = World(make_config()), World(make_config())
    now = one.clock.timestamp()
    assert [one.streams.status(s, now) for s in one.history.streams] == [
        two.streams.status(s, now) for s in two.history.streams
    ]
    assert one.streams.counts(now) == two.streams.counts(now)


def test_reading_streams_changes_no_history_record() -> None:
    plain, read = World(make_config()), World(make_config())
    now = read.clock.timestamp()
    for stream in read.history.streams:
        read.streams.status(stream, now)
    read.streams.counts(now)
    assert read.history_records(include_payload=True) == plain.history_records(include_payload=True)
