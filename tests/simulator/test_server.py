"""The HTTP shell: fault knobs, hostile requests, the command line, and what gets logged."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator, serve_in_thread
from tests.simulator.conftest import KEY, make_config

REPO = Path(__file__).resolve().parents[2]


def test_5xx_knob(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.faults.rate_5xx = 1.0
    statuses = {http.get("/history", params={"limit": 1}).status_code for _ in range(30)}
    assert statuses <= {500, 502, 503, 504} and len(statuses) >= 3
    sim.world.faults.rate_5xx = 0.0
    assert http.get("/history", params={"limit": 1}).status_code == 200


def test_429_knob_sends_retry_after_in_each_hosts_style(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 3
    streams = http.get("/history", params={"limit": 1})
    assert streams.status_code == 429 and streams.headers["Retry-After"] == "3"
    assert streams.json() == {"message": "Rate limit exceeded"}
    aptos = http.get("/aptos/mainnet/nfts/creators", params={"limit": 1})
    assert aptos.json() == {"statusCode": 429, "message": "Rate limit exceeded", "error": "Too Many Requests"}
    # A missing key is still a 401, not a 429.
    assert httpx.get(f"{sim.base_url}/history?limit=1").status_code == 401


def test_latency_knob(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.faults.latency_ms = 150
    started = time.perf_counter()
    http.get("/history", params={"limit": 1})
    assert time.perf_counter() - started >= 0.15


def test_truncation_knob_cuts_the_connection(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.faults.truncate_rate = 1.0
    with pytest.raises(httpx.RemoteProtocolError):
        http.get("/history", params={"limit": 20})
    sim.world.faults.truncate_mode = "body"
    response = http.get("/history", params={"limit": 20})
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("POST", "/history?limit=1", 405),
        ("GET", "/nope", 404),
        ("GET", "/api/v2/nft//owners", 400),
        ("GET", "/history?" + "&".join(f"f{i}=1" for i in range(500)) + "&limit=1", 400),
        ("GET", "/history?limit=1&cursor=" + "a" * 5000, 400),
        ("GET", "/history?limit=99999999999999999999", 400),
        ("GET", "/history?limit=%00", 400),
        ("GET", "/api/v2/nft/" + "0x" + "a" * 40 + "/owners?chain=%27%3B--", 400),
        ("GET", "/aptos/mainnet/nfts/creators?limit=1&creator_addresses[99999]=x", 400),
    ],
)
def test_hostile_requests_get_a_json_answer(http: httpx.Client, method: str, path: str, status: int) -> None:
    response = http.request(method, path)
    assert response.status_code == status
    assert "message" in response.json()


def test_raw_garbage_does_not_take_the_server_down(sim: RunningSimulator, http: httpx.Client) -> None:
    host, port = sim.base_url.removeprefix("http://").split(":")
    for garbage in (
        b"\x00\x01\x02\r\n\r\n",
        b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
    ):
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(garbage)
            s.recv(1024)
    assert http.get("/history", params={"limit": 1}).status_code == 200


def test_the_command_line_serves_logs_without_the_key_and_stops_on_sigterm(tmp_path: Path) -> None:
    secret = "cli-secret-key-7731"
    process = subprocess.Popen(
        [sys.executable, "-m", "dashboard.simulator", "--port", "0", "--api-key", secret, "--seed", "3",
         "--speed", "60"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", first)
        assert found, first
        base = f"http://127.0.0.1:{found.group(1)}"
        assert httpx.get(f"{base}/history?limit=2", headers={"X-API-Key": secret}).status_code == 200
        assert httpx.get(f"{base}/history?limit=2&key={secret}").status_code == 401
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    log = first + output
    assert "GET /history?limit=2 200" in log and "stopped" in log
    assert secret not in log


def test_the_key_is_compared_exactly(sim: RunningSimulator) -> None:
    for wrong in (KEY.upper(), KEY + "x", KEY[:-1], "", "é"):
        response = httpx.get(f"{sim.base_url}/history?limit=1", headers={"X-API-Key": wrong.encode("utf-8")})
        assert response.status_code == 401


def raw_exchange(sim: RunningSimulator, data: bytes, timeout: float = 5.0) -> bytes:
    """Send `data` on a fresh connection and read until the server closes it."""
    host, port = sim.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize(
    "method, path, status, body",
    [
        ("OPTIONS", "/history?limit=1", 405, {"message": "Cannot OPTIONS /history"}),
        ("TRACE", "/api/v2/nft/0x" + "a" * 40 + "/owners", 405, None),
        ("PROPFIND", "/history", 405, None),
        (
            "OPTIONS",
            "/aptos/testnet/nfts/creators",
            405,
            {
                "statusCode": 405,
                "message": "Cannot OPTIONS /aptos/testnet/nfts/creators",
                "error": "Method Not Allowed",
            },
        ),
        ("OPTIONS", "/nope", 404, {"message": "Cannot OPTIONS /nope"}),
        ("POST", "/nope", 404, {"message": "Cannot POST /nope"}),
    ],
)
def test_every_method_gets_a_json_answer(
    http: httpx.Client, method: str, path: str, status: int, body: dict | None
) -> None:
    response = http.request(method, path)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    if body is not None:
        assert response.json() == body
    if status == 405:
        assert response.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    "request_bytes, status, nest",
    [
        (b"GET /history?limit=1&x=" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414, False),
        (b"GET /history?limit=1 HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431, False),
        (
            b"GET /history?limit=1 HTTP/1.1\r\n"
            + b"".join(b"X-H%d: 1\r\n" % i for i in range(200))
            + b"\r\n",
            431,
            False,
        ),
        (b"GARBAGE\r\n\r\n", 400, False),
        (b"GET /history?limit=1 HTTP/2.0\r\n\r\n", 505, False),
        (b"GET /aptos/mainnet/nfts/creators HTTP/2.0\r\n\r\n", 505, True),
        # HTTP/0.9 answers carry no status line; the refusal must still have one.
        (b"GET /history?limit=1\r\n\r\n", 400, False),
    ],
)
def test_requests_the_http_parser_refuses_get_a_json_answer(
    sim: RunningSimulator, request_bytes: bytes, status: int, nest: bool
) -> None:
    answer = raw_exchange(sim, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and int(head.split()[1]) == status, answer[:200]
    assert b"content-type: application/json" in head.lower()
    parsed = json.loads(body)
    assert isinstance(parsed["message"], str)
    assert ("statusCode" in parsed) is nest


def test_the_5xx_pages_name_their_own_status(sim: RunningSimulator, http: httpx.Client) -> None:
    sim.world.faults.rate_5xx = 1.0
    seen: dict[int, str] = {}
    for _ in range(60):
        response = http.get("/history", params={"limit": 1})
        seen[response.status_code] = response.text
    assert "504 Gateway Timeout" in seen[504] and "502 Bad Gateway" in seen[502]


def test_a_chunked_body_ends_the_connection_instead_of_posing_as_the_next_request(
    sim: RunningSimulator,
) -> None:
    answer = raw_exchange(
        sim,
        b"POST /history?limit=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
    )
    # One answer, to the request that was sent; none to "5" read as a request line.
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 405")
    assert b"Connection: close" in answer


def test_idle_and_stalled_clients_are_dropped_without_blocking_others() -> None:
    with serve_in_thread(make_config(idle_timeout=0.5)) as running:
        host, port = running.base_url.removeprefix("http://").split(":")
        silent = socket.create_connection((host, int(port)), timeout=5)
        stalled = socket.create_connection((host, int(port)), timeout=5)
        # Announces a body it never sends.
        stalled.sendall(b"POST /history HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        with httpx.Client(base_url=running.base_url, headers={"X-API-Key": KEY}, timeout=5) as client:
            assert client.get("/history", params={"limit": 1}).status_code == 200
        started = time.perf_counter()
        assert silent.recv(1024) == b""
        assert stalled.recv(1024) == b""
        assert time.perf_counter() - started < 3
        silent.close()
        stalled.close()
