"""Answers of the streams host's other operations validated against the provider's published OpenAPI file."""

from __future__ import annotations

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator
from tests.simulator import schemas
from tests.simulator.test_conformance import errors_of

STREAMS = schemas.operation_validator("streams.json", "/streams/evm", "get")
STREAM = schemas.operation_validator("streams.json", "/streams/evm/{id}", "get")
STATUS = schemas.operation_validator("streams.json", "/streams/evm/{id}/status", "post")
APTOS_STREAMS = schemas.operation_validator("streams.json", "/streams/aptos", "get")
STATS = schemas.operation_validator("streams.json", "/stats", "get")
STREAM_STATS = schemas.operation_validator("streams.json", "/stats/{streamId}", "get")
LOGS = schemas.operation_validator("streams.json", "/history/logs", "get")
REPLAY = schemas.operation_validator("streams.json", "/history/replay/{streamId}/{id}", "post")
# Not in the published file; the contract says it answers with the delivered payload.
PAYLOAD = schemas.validator("streams.json", "webhookTypes.IWebhookUnParsed")


def test_the_operation_validators_reject_wrong_bodies() -> None:
    assert errors_of(STREAMS, {"result": [{"id": "x", "status": "sleeping"}], "total": "6"})
    assert errors_of(STATS, {"totalWebhooksDelivered": "12"})
    assert errors_of(LOGS, {"result": [{"id": "x", "deliveryStatus": "maybe"}], "total": 1})
    assert errors_of(REPLAY, {"id": "x"})


# The stream's ABI: the published file types it as an object, but a stream is created with, and shows, the list
# of ABI entries its payloads carry (the payload schema's `abi`).
ABI = schemas.validator("streams.json", "AbiItem")


def published(stream: dict) -> dict:
    """The stream without the two fields the contract adds to EVM streams (§5: `updatedAt`, `isErrorSince`),
    its ABI checked apart as a list of ABI entries."""
    assert "updatedAt" in stream and "isErrorSince" in stream
    abi = stream["abi"]
    assert abi is None or (isinstance(abi, list) and all(errors_of(ABI, entry) == [] for entry in abi))
    return {k: v for k, v in stream.items() if k not in ("updatedAt", "isErrorSince", "abi")}


def test_stream_lists_and_streams_match_the_published_schema(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    body = http.get("/streams/evm", params={"limit": 4}).json()
    assert errors_of(STREAMS, {**body, "result": [published(s) for s in body["result"]]}) == []
    assert len(body["result"]) == 4 and body["total"] == 6 and body["cursor"]
    rest = http.get("/streams/evm", params={"limit": 4, "cursor": body["cursor"]}).json()
    assert errors_of(STREAMS, {**rest, "result": [published(s) for s in rest["result"]]}) == []
    assert len(rest["result"]) == 2 and "cursor" not in rest
    for stream in body["result"] + rest["result"]:
        assert errors_of(STREAM, published(http.get(f"/streams/evm/{stream['id']}").json())) == []
    assert errors_of(APTOS_STREAMS, http.get("/streams/aptos", params={"limit": 10}).json()) == []


def test_a_status_change_answers_the_stream_in_the_published_schema(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    now = sim.world.clock.timestamp()
    active = next(s for s in sim.world.history.streams if sim.world.streams.status(s, now)[0] == "active")
    response = http.post(f"/streams/evm/{active.id}/status", json={"status": "paused"})
    assert response.status_code == 200
    assert errors_of(STATUS, published(response.json())) == [] and response.json()["status"] == "paused"


def test_stats_match_the_published_schema(sim: RunningSimulator, http: httpx.Client) -> None:
    project = http.get("/stats").json()
    assert errors_of(STATS, project) == []
    assert len(project["streams"]) == 6
    for stream in sim.world.history.streams:
        assert errors_of(STREAM_STATS, http.get(f"/stats/{stream.id}").json()) == []


@pytest.mark.parametrize("extra", [{}, {"deliveryStatus": "failed"}])
def test_delivery_logs_match_the_published_schema(http: httpx.Client, extra: dict[str, str]) -> None:
    cursor = None
    for _ in range(3):
        params: dict[str, object] = {"limit": 100, **extra}
        if cursor:
            params["cursor"] = cursor
        body = http.get("/history/logs", params=params).json()
        assert errors_of(LOGS, body) == []
        assert body["result"]
        if "cursor" not in body:
            break
        cursor = body["cursor"]


def test_a_replay_answers_a_history_record_in_the_published_schema(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    now = sim.world.clock.timestamp()
    record = next(
        r
        for r in http.get("/history", params={"limit": 100}).json()["result"]
        if sim.world.streams.status(sim.world.streams.by_id[r["streamId"]], now)[0] == "active"
    )
    response = http.post(f"/history/replay/{record['streamId']}/{record['id']}")
    assert response.status_code == 200
    body = schemas.without_payload_extras({"result": [response.json()]})["result"][0]
    assert errors_of(REPLAY, body) == []


def test_a_resent_block_answers_a_webhook_payload(sim: RunningSimulator, http: httpx.Client) -> None:
    now = sim.world.clock.timestamp()
    stream = next(s for s in sim.world.history.streams if sim.world.streams.status(s, now)[0] == "active")
    response = http.post(f"/streams/evm/{stream.chain.hex_id}/block-to-webhook/21000000/{stream.id}")
    assert response.status_code == 200
    payload = schemas.without_payload_extras({"result": [{"payload": response.json()}]})["result"][0][
        "payload"
    ]
    assert errors_of(PAYLOAD, payload) == []
    assert payload["block"]["number"] == "21000000" and payload["streamId"] == stream.id
