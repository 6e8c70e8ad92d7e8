"""The HTTP shell: fault knobs, hostile requests, the command line, and what gets logged."""

from __future__ import annotations

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

from dashboard.simulator.server import RunningSimulator
from tests.simulator.conftest import KEY

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
