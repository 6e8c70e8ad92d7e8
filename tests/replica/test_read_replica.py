"""The read replica, against a real streaming replica (tests/replica/pair.py) and the app's web process
(gunicorn) in front of both: the marked pages and the export read the replica, which replay paused shows (they
show the older state and the lag banner); logins, sessions, the admin and every write use the primary; a
replica too far behind or down sends the pages to the primary, and /metrics, /healthz and /readyz say so."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.replica.pair import ReplicaPair, binaries, environment
from tests.test_processes import free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct-horse-battery"
METRICS_TOKEN = "replica-test-token"

pytestmark = pytest.mark.skipif(
    binaries() is None, reason="needs Postgres binaries with pg_basebackup (the pgserver package's) for a replica"
)


def manage(pair: ReplicaPair, *args: str) -> None:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          env=environment(DATABASE_URL=pair.primary_url), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def generate(pair: ReplicaPair, seed: str, count: int) -> None:
    manage(pair, "generate_deliveries", "--count", str(count), "--seed", seed, "--days", "0.5")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicaPair]:
    # Its own INFO lines would also go to a closed stream from its exit hook.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    started = ReplicaPair(tmp_path_factory.mktemp("replica"))
    try:
        # Written on the primary alone; the replica gets it all by streaming replication.
        manage(started, "migrate", "--no-input", "-v", "0")
        manage(started, "add_viewer", "viewer", "viewer@example.com", "--password", PASSWORD)
        manage(started, "add_staff", "staff", "staff@example.com", "--password", PASSWORD)
        generate(started, "one", 7)
        started.caught_up()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def web(pair: ReplicaPair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """Starts the web process (gunicorn, as the Procfile does) with settings of the test's; its base URL."""
    children: list[subprocess.Popen[str]] = []
    logs = tmp_path_factory.mktemp("web")

    def start(**settings: str) -> str:
        port = free_port()
        env = environment(DATABASE_URL=pair.primary_url, DATABASE_REPLICA_URL=pair.replica_url,
                          REDIS_URL="redis://127.0.0.1:6379/8", CACHE_KEY_PREFIX=f"replica-{port}",
                          METRICS_TOKEN=METRICS_TOKEN, **settings)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        log = (logs / f"{port}.log").open("w")
        child = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
             "--threads", "2"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
        )
        children.append(child)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert child.poll() is None, (logs / f"{port}.log").read_text()[-3000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the web process did not answer"
            time.sleep(0.2)

    yield start
    for child in children:
        child.terminate()
        child.wait(15)


def login(base: str, username: str = "viewer") -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    client.get("/accounts/login/")
    answer = client.post("/accounts/login/", data={
        "username": username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"],
    }, headers={"Referer": f"{base}/accounts/login/"})
    assert answer.status_code == 302, answer.text[-2000:]
    return client


def export_rows(client: httpx.Client) -> int:
    answer = client.get("/deliveries/export.csv")
    assert answer.status_code == 200, answer.text[-2000:]
    return len(answer.text.strip().splitlines()) - 1


def banner_lag(html: str) -> int | None:
    found = re.search(r'data-replica-lag="(\d+)"', html)
    return int(found.group(1)) if found else None


def page_reads(base: str) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10).text
    return {
        (database, reason): float(value)
        for database, reason, value in re.findall(
            r'^dashboard_replica_page_reads_total\{database="(\w+)",reason="(\w+)"\} (\S+)$', text, re.M
        )
    }


def replica_lag(base: str) -> float | None:
    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10).text
    found = re.search(r"^dashboard_replica_lag_seconds (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def wait_lag(pair: ReplicaPair, seconds: float) -> None:
    deadline = time.monotonic() + seconds + 30
    while (pair.on_replica("SELECT extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())")
           or 0) < seconds:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_pages_read_the_replica_and_show_its_lag_while_logins_and_writes_use_the_primary(
    pair: ReplicaPair, web: Callable[..., str]
) -> None:
    base = web(REPLICA_MAX_LAG_SECONDS="600", REPLICA_LAG_NOTICE_SECONDS="2")
    client = login(base)
    assert export_rows(client) == 7
    listing = client.get("/deliveries/")
    assert listing.status_code == 200
    # Caught up: no banner.
    assert banner_lag(listing.text) is None

    pair.pause_replay()
    try:
        generate(pair, "two", 5)
        pair.received_not_replayed()
        wait_lag(pair, 2)
        # A login now exists on the primary only: the login, its session and the user's permissions are read
        # there, or this client would be sent back to the login page.
        fresh = login(base)
        listing = fresh.get("/deliveries/")
        assert listing.status_code == 200
        lag = banner_lag(listing.text)
        assert lag is not None and 2 <= lag < 600, listing.text[:3000]
        # The page and the streamed export show the replica's older state.
        assert "generated-two" not in fresh.get("/streams/").text
        assert export_rows(fresh) == 7
        assert "generated-two" in pair.on_primary("SELECT string_agg(name, ',') FROM deliveries_source")
        # A page that is not marked (the admin) reads the primary.
        admin = login(base, "staff").get("/admin/sources/source/")
        assert admin.status_code == 200 and "generated-two" in admin.text
        metrics_lag = replica_lag(base)
        assert metrics_lag is not None and metrics_lag >= 2
        health = httpx.get(f"{base}/healthz", timeout=10).json()
        assert health["replica"]["ok"] is True and health["replica"]["in_recovery"] is True
        assert health["replica"]["lag_seconds"] >= 2 and health["replica"]["pages_read"] == "replica"
    finally:
        pair.resume_replay()

    listing = fresh.get("/deliveries/")
    assert banner_lag(listing.text) is None
    assert export_rows(fresh) == 12
    assert page_reads(base).get(("replica", "current"), 0) >= 7


def test_a_replica_too_far_behind_sends_the_pages_to_the_primary(pair: ReplicaPair, web: Callable[..., str]) -> None:
    base = web(REPLICA_MAX_LAG_SECONDS="2", REPLICA_LAG_NOTICE_SECONDS="1")
    client = login(base)
    before = export_rows(client)
    pair.pause_replay()
    try:
        generate(pair, "three", 4)
        pair.received_not_replayed()
        wait_lag(pair, 2.5)
        listing = client.get("/deliveries/")
        assert listing.status_code == 200
        # Read from the primary: the newest rows, and no lag banner since the page is current.
        assert banner_lag(listing.text) is None
        assert export_rows(client) == before + 4
        assert page_reads(base).get(("primary", "lag"), 0) >= 2
        health = httpx.get(f"{base}/readyz", timeout=10).json()
        assert health["replica"]["pages_read"] == "primary" and health["replica"]["lag_seconds"] > 2
    finally:
        pair.resume_replay()
    export_rows(client)
    assert page_reads(base).get(("replica", "current"), 0) >= 1


def test_pages_read_the_primary_while_the_replica_is_down_and_the_replica_again_once_back(
    pair: ReplicaPair, web: Callable[..., str]
) -> None:
    base = web(REPLICA_MAX_LAG_SECONDS="600")
    client = login(base)
    assert client.get("/deliveries/").status_code == 200
    pair.stop_replica()
    try:
        generate(pair, "four", 3)
        expected = pair.on_primary("SELECT count(*) FROM deliveries_delivery")
        # The first page after the replica went away finds it gone (a failed check, or its reads failing on
        # a connection kept from before) and reads the primary; so do the pages after it.
        assert export_rows(client) == expected
        assert client.get("/streams/").status_code == 200
        reads = page_reads(base)
        assert reads.get(("primary", "unreachable"), 0) + reads.get(("primary", "failed"), 0) >= 2, reads
        health = httpx.get(f"{base}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["replica"]["ok"] is False
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
    finally:
        pair.start_replica()
    pair.caught_up()
    current = page_reads(base).get(("replica", "current"), 0)
    # Asked again once RETRY_SECONDS have passed since it failed.
    deadline = time.monotonic() + 30
    while page_reads(base).get(("replica", "current"), 0) == current:
        assert time.monotonic() < deadline, "the pages did not go back to the replica"
        assert client.get("/deliveries/").status_code == 200
        time.sleep(0.5)
