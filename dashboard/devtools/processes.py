"""Child processes of the polling benchmarks: simulators and Celery workers started from this project's
directory with this interpreter, stopped at the end, and the sources that read the simulators."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.core.management.base import CommandError

from dashboard.sources.models import Source

SIMULATOR_KEY = "bench-key"


def start(log: Path, args: list[str]) -> subprocess.Popen[bytes]:
    """`python <args>` in the project directory, output to `log`; the environment (DATABASE_URL, REDIS_URL, …)
    is inherited."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=settings.BASE_DIR, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR)},
        )


def stop(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM (a Celery worker's warm shutdown: its running poll finishes), then SIGKILL to what it started."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def start_simulator(log: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """A simulator on a free port with the benchmark key, and its base URL once it has answered a first
    history request (it builds its history then: seconds for a million records, which a client's first
    page would otherwise wait for)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    child = start(log, ["-m", "dashboard.simulator", "--port", str(port), "--api-key", SIMULATOR_KEY,
                        "--log-level", "WARNING", *options])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    url = f"http://127.0.0.1:{port}"
                    httpx.get(f"{url}/history", params={"limit": 1}, headers={"X-API-Key": SIMULATOR_KEY},
                              timeout=3600)
                    return child, url
            time.sleep(0.2)
    except BaseException:  # Ctrl-C or a failed first request: the child goes too
        stop(child)
        raise
    stop(child)
    raise CommandError(f"the simulator did not start; see {log}")


def simulator_source(name: str, url: str) -> Source:
    return Source.objects.create(
        name=name, api_key=SIMULATOR_KEY, streams_base_url=url, evm_base_url=url,
        aptos_mainnet_base_url=f"{url}/aptos/mainnet", aptos_testnet_base_url=f"{url}/aptos/testnet",
    )


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())
