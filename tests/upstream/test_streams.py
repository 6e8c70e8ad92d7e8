"""Streams-host operations of the client against the simulator, and the write-safety rules."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from dashboard.simulator.server import RunningSimulator
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.records import RecordError
from dashboard.upstream.streams import (
    DeliveryLog,
    Stream,
    fetch_all_streams,
    fetch_logs_page,
    fetch_stats,
    fetch_stream,
    fetch_streams_page,
    iter_logs_pages,
    replay_delivery,
    resend_block,
    set_stream_status,
)
from tests.upstream.conftest import KEY, Recording, Sleeps

MakeClient = Callable[..., UpstreamClient]


def posts(wire: Recording) -> list[str]:
    return [url.path for url in wire.urls if "/replay/" in url.path or url.path.endswith("/status")]


def failing_record(sim: RunningSimulator) -> dict:
    now = sim.world.clock.timestamp()
    active = {s.id for s in sim.world.history.streams if sim.world.streams.status(s, now)[0] == "active"}
    return next(r for r in sim.world.history_records() if r["streamId"] in active and r["errorMessage"])


def attempts_of(sim: RunningSimulator, record_id: str) -> int:
    now = sim.world.clock.timestamp()
    delivery = sim.world.history.find(record_id, now)
    assert delivery is not None
    return len(sim.world.history.attempts_made(delivery, now))


def test_records_are_read_leniently() -> None:
    stream = Stream.parse(
        {
            "id": STREAM_ID.upper(),
            "status": "Error",
            "chainIds": "0x1",
            "isErrorSince": "2025-06-01T00:00:00Z",
        }
    )
    assert stream.id == STREAM_ID and stream.status == "error" and stream.failing
    assert stream.chain_ids == ("0x1",) and stream.error_since is not None and stream.webhook_url is None
    aptos = Stream.parse({"id": STREAM_ID, "status": "active", "network": ["mainnet"]}, kind="aptos")
    assert aptos.chain_ids == ("mainnet",) and aptos.healthy
    log = DeliveryLog.parse({"id": "x", "retries": "2", "blockNumber": 12.0, "deliveryStatus": "SUCCESS"})
    assert log.retries == 2 and log.block_number == 12 and log.succeeded and log.created_at is None
    with pytest.raises(RecordError):
        Stream.parse({"status": "active"})


def test_streams_come_typed_with_their_status(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    streams = fetch_all_streams(client)
    assert len(streams) == 6
    assert {s.status for s in streams} <= {"active", "paused", "error", "terminated"}
    now = sim.world.clock.timestamp()
    for stream in streams:
        truth = sim.world.streams.by_id[stream.id]
        assert (stream.status, stream.status_message) == sim.world.streams.status(truth, now)
        assert stream.webhook_url == truth.webhook.url and stream.chain_ids == (truth.chain.hex_id,)
        assert fetch_stream(client, stream.id) == stream
    page = fetch_streams_page(client, limit=4)
    assert len(page.streams) == 4 and page.total == 6 and page.cursor
    assert fetch_streams_page(client, kind="aptos", limit=10).streams == []


def test_stats_and_logs_come_typed(sim: RunningSimulator, make_client: MakeClient) -> None:
    client = make_client(sim.base_url)
    stats = fetch_stats(client)
    assert stats.counts.attempts == fetch_logs_page(client, limit=1).total
    assert set(stats.per_stream) == {s.id for s in sim.world.history.streams}
    one = next(iter(stats.per_stream))
    assert fetch_stats(client, one).counts == stats.per_stream[one]
    assert stats.created_at is not None and stats.updated_at is not None
    pages = list(iter_logs_pages(client, limit=50, delivery_status=["failed"], max_pages=2))
    logs = [log for page in pages for log in page.logs]
    assert len(logs) == 100 and all(not log.succeeded and log.error_message for log in logs)
    assert all(log.block_number and log.created_at and log.stream_id for log in logs)


def test_a_replay_returns_the_record_after_its_attempt(
    sim: RunningSimulator, make_client: MakeClient
) -> None:
    record = failing_record(sim)
    replayed = replay_delivery(make_client(sim.base_url), record["streamId"], record["id"])
    assert replayed.id == record["id"] and replayed.retries == record["tinyPayload"]["retries"]
    seen = {r["id"]: r for r in sim.world.history_records()}[record["id"]]
    assert (
        replayed.error_message == seen["errorMessage"]
        and replayed.record["tinyPayload"] == seen["tinyPayload"]
    )


def test_status_changes_and_their_refusals(make_simulator: Callable[..., RunningSimulator], make_client: MakeClient) -> None:
    # Eight streams: the scenario terminates a stream only from the seventh on (arbitrum-mints).
    sim = make_simulator(api_key=KEY, streams=8)
    client = make_client(sim.base_url)
    streams = fetch_all_streams(client)
    active = next(s for s in streams if s.status == "active")
    change = set_stream_status(client, active.id, "paused")
    assert change.status == "paused" and change.stream is not None and change.stream.id == active.id
    assert fetch_stream(client, active.id).status == "paused"
    terminated = next(s for s in streams if s.status == "terminated")
    with pytest.raises(errors.BadRequest, match="terminated"):
        set_stream_status(client, terminated.id, "active")
    with pytest.raises(errors.InvalidRequest):
        set_stream_status(client, active.id, "error")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidRequest):
        replay_delivery(client, "../../stats", active.id)
    with pytest.raises(errors.NotFound, match="History not found"):
        replay_delivery(client, active.id, terminated.id)


def test_a_resent_block_returns_its_payload(sim: RunningSimulator, make_client: MakeClient) -> None:
    stream = next(s for s in fetch_all_streams(make_client(sim.base_url)) if s.status == "active")
    sent = resend_block(make_client(sim.base_url), stream.id, stream.chain_ids[0], 21_000_000)
    assert sent.payload["block"]["number"] == "21000000" and sent.payload["streamId"] == stream.id


# -- writes whose answer is lost are not sent again -------------------------------------------------


def test_a_replay_whose_answer_is_cut_off_is_not_sent_again(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, sleeps: Sleeps
) -> None:
    record = failing_record(sim)
    before = attempts_of(sim, record["id"])
    sim.world.faults.truncate_rate = 1.0
    with pytest.raises(errors.OutcomeUnknown) as caught:
        replay_delivery(make_client(sim.base_url), record["streamId"], record["id"])
    assert not caught.value.transient and caught.value.kind == "outcome_unknown"
    assert len(posts(wire)) == 1 and sleeps.delays == []
    # The provider did act: the history record shows one more attempt.
    sim.world.faults.truncate_rate = 0.0
    assert attempts_of(sim, record["id"]) == before + 1


@pytest.mark.parametrize("fault", ["5xx", "timeout"])
def test_a_status_change_whose_answer_is_lost_is_not_sent_again(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, sleeps: Sleeps, fault: str
) -> None:
    stream = next(
        s
        for s in sim.world.history.streams
        if sim.world.streams.status(s, sim.world.clock.timestamp())[0] == "active"
    )
    if fault == "5xx":
        sim.world.faults.rate_5xx = 1.0
        client = make_client(sim.base_url)
    else:
        sim.world.faults.latency_ms = 400
        client = make_client(sim.base_url, read_timeout=0.1)
    with pytest.raises(errors.OutcomeUnknown, match="read the state again"):
        set_stream_status(client, stream.id, "paused")
    assert len(posts(wire)) == 1 and sleeps.delays == []


def test_a_write_refused_with_429_is_sent_again_after_the_wait(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, sleeps: Sleeps
) -> None:
    stream = next(
        s
        for s in sim.world.history.streams
        if sim.world.streams.status(s, sim.world.clock.timestamp())[0] == "active"
    )
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 7

    def lift() -> None:
        sim.world.faults.rate_429 = 0.0

    sleeps.on_sleep = lift
    change = set_stream_status(make_client(sim.base_url), stream.id, "paused")
    assert change.status == "paused"
    assert len(posts(wire)) == 2 and len(sleeps.delays) == 1 and 7 <= sleeps.delays[0] < 7.5


def test_a_429_asking_for_longer_than_the_cap_is_raised(
    sim: RunningSimulator, make_client: MakeClient, wire: Recording, sleeps: Sleeps
) -> None:
    stream = sim.world.history.streams[0]
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 120
    with pytest.raises(errors.RateLimited) as caught:
        set_stream_status(make_client(sim.base_url), stream.id, "active")
    assert caught.value.retry_after == 120 and len(posts(wire)) == 1 and sleeps.delays == []


class Dropper:
    """A loopback server that reads each request whole, then hangs up without answering (or answers a 500
    that echoes the key), counting what it received."""

    def __init__(self, answer: bytes | None = None) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + body)
                if self.answer is not None:
                    conn.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def dropper() -> Iterator[Dropper]:
    server = Dropper()
    yield server
    server.close()


STREAM_ID = "0b7b0a4e-3c2d-4f6a-9e1b-2c3d4e5f6a7b"
HISTORY_ID = "1c8c1b5f-4d3e-4a7b-8f2c-3d4e5f6a7b8c"


def test_a_connection_dropped_after_the_request_is_not_retried(
    dropper: Dropper, make_client: MakeClient, sleeps: Sleeps
) -> None:
    with pytest.raises(errors.OutcomeUnknown) as caught:
        replay_delivery(make_client(dropper.url), STREAM_ID, HISTORY_ID)
    assert len(dropper.requests) == 1 and sleeps.delays == []
    assert dropper.requests[0].startswith(f"POST /history/replay/{STREAM_ID}/{HISTORY_ID} ".encode())
    assert KEY not in caught.value.message


def test_a_status_change_sends_its_body_and_a_dropped_answer_is_not_retried(
    dropper: Dropper, make_client: MakeClient, sleeps: Sleeps
) -> None:
    with pytest.raises(errors.OutcomeUnknown):
        set_stream_status(make_client(dropper.url), STREAM_ID, "active")
    assert len(dropper.requests) == 1 and sleeps.delays == []
    assert dropper.requests[0].endswith(b'{"status":"active"}')
    assert b"content-type: application/json" in dropper.requests[0].lower()


def test_a_5xx_echoing_the_key_on_a_write_is_masked_and_not_retried(
    make_client: MakeClient, sleeps: Sleeps
) -> None:
    body = ('{"message":"upstream failed for key ' + KEY.upper() + '"}').encode()
    server = Dropper(
        b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    try:
        with pytest.raises(errors.OutcomeUnknown) as caught:
            replay_delivery(make_client(server.url), STREAM_ID, HISTORY_ID)
    finally:
        server.close()
    assert len(server.requests) == 1 and sleeps.delays == []
    assert caught.value.status_code == 502 and "***" in caught.value.message
    assert KEY.lower() not in caught.value.message.lower()


def test_a_write_that_cannot_connect_was_never_sent_and_is_retried(
    make_client: MakeClient, sleeps: Sleeps
) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(errors.Unreachable):
        replay_delivery(make_client(f"http://127.0.0.1:{port}"), STREAM_ID, HISTORY_ID)
    assert len(sleeps.delays) == 3
