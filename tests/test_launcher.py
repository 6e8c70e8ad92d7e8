"""The demo's launcher: one demo per clone (the lock, a second start refused), its ports, its signals, and a demo
run end to end as a script runs it — with SIGINT ignored — stopped by SIGINT with everything it started."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from django.core.mail import EmailMessage, EmailMultiAlternatives
from prometheus_client.parser import text_string_to_metric_families

from dashboard import launcher
from dashboard.demo_mail import EmailBackend, summary
from tests.checks import subprocess_database_url

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def listening(port: int = 0) -> Iterator[int]:
    """A server socket on 127.0.0.1 (any free port by default), as another program holding the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield int(sock.getsockname()[1])


def free_run(length: int) -> int:
    """The first of `length` consecutive free ports."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = int(sock.getsockname()[1])
        if base + length < 65536 and all(launcher.port_free(base + n) for n in range(length)):
            return base
    raise AssertionError("no run of free ports")


def test_a_second_demo_in_the_clone_is_refused_and_told_where_the_first_runs(tmp_path: Path) -> None:
    first = launcher.DemoLock(tmp_path / "demo.lock")
    assert first.acquire()
    first.record(url="http://127.0.0.1:8000", simulator="http://127.0.0.1:8001", started="2026-01-02T03:04:05+00:00",
                 state="running")
    second = launcher.DemoLock(tmp_path / "demo.lock")
    assert not second.acquire()
    message = launcher.already_running(second.holder())
    assert f"process {os.getpid()}" in message
    assert "Open      http://127.0.0.1:8000/\n" in message and "http://127.0.0.1:8001" in message
    assert f"kill -INT {os.getpid()}" in message

    first.release()
    assert second.acquire()
    assert (tmp_path / "demo.lock").read_text() == ""
    second.release()


def test_the_lock_of_a_killed_demo_is_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "demo.lock"
    script = (
        "import sys, time; from pathlib import Path; from dashboard.launcher import DemoLock; "
        f"lock = DemoLock(Path({str(path)!r})); assert lock.acquire(); lock.record(url='http://127.0.0.1:9'); "
        "print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert not launcher.DemoLock(path).acquire()
    finally:
        holder.kill()
        holder.wait()
    assert "127.0.0.1:9" in path.read_text()  # what the killed demo left
    lock = launcher.DemoLock(path)
    assert lock.acquire()
    assert path.read_text() == ""
    lock.release()


def test_a_busy_port_is_named_with_the_port_taken_instead_and_two_servers_never_share_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = free_run(4)
    # The first demo holds base (web) and base + 1 (simulator): the second's web server moves to base + 2, and
    # its simulator, which would also have moved there, to base + 3.
    with listening(base), listening(base + 1):
        taken: dict[int, str] = {}
        web = launcher.choose_port("web server", base, taken)
        simulator = launcher.choose_port("simulator", base + 1, taken)
    assert (web, simulator) == (base + 2, base + 3)
    out = capsys.readouterr().out
    assert f"port {base} is in use: the web server uses port {base + 2}" in out
    assert f"port {base + 1} is in use: the simulator uses port {base + 3}" in out

    # The same port asked for both: the simulator takes the next one and says whose it is.
    taken = {}
    web = launcher.choose_port("web server", base, taken)
    simulator = launcher.choose_port("simulator", base, taken)
    assert (web, simulator) == (base, base + 1)
    assert f"port {base} is the web server's: the simulator uses port {base + 1}" in capsys.readouterr().out


def test_the_first_signal_unwinds_the_launcher_and_a_later_one_hurries_the_stop() -> None:
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as inherited from a script
    try:
        signals = launcher.StopSignals()
        signals.install()
        with pytest.raises(launcher.Stopped):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert signals.stopping and not signals.hurry
        os.kill(os.getpid(), signal.SIGTERM)  # while stopping: no second unwinding
        time.sleep(0.1)
        assert signals.hurry
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def incident_mail(body: str) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives("[FAILING] stream usdc-transfers: 8 failed", body, "a@localhost",
                                     ["ops@example.com", "dev@example.com"])
    message.attach_alternative("<p>" + "x" * 50_000 + "</p>", "text/html")
    return message


def test_the_demo_mail_backend_prints_one_line_a_mail_with_its_incident_page() -> None:
    stream = io.StringIO()
    opened = incident_mail("FAILING\n\nIncident:          http://127.0.0.1:8000/alerts/incidents/3/\n")
    digest = EmailMessage("Digest", "  Incident: http://h/alerts/incidents/4/\n  Incident: http://h/alerts/incidents/7/\n"
                          "Alerts: http://h/alerts/\n", "a@localhost", ["ops@example.com"])
    test_mail = EmailMessage("Test", "If you can read this…\n\nAlerts: http://h/alerts/\n", "a@localhost", ["o@x"])
    assert EmailBackend(stream=stream).send_messages([opened, digest, test_mail]) == 3
    assert stream.getvalue().splitlines() == [
        '[mail] "[FAILING] stream usdc-transfers: 8 failed" to ops@example.com, dev@example.com: '
        "http://127.0.0.1:8000/alerts/incidents/3/",
        '[mail] "Digest" to ops@example.com: http://h/alerts/incidents/4/ (and 1 more incidents)',
        '[mail] "Test" to o@x: http://h/alerts/',
    ]
    assert summary(EmailMessage("No link", "text", "a@localhost", ["o@x"])) == '[mail] "No link" to o@x: no link'


def demo_processes(marker: str) -> list[int]:
    """Every process whose environment carries the marker: the launcher and all it started, at any depth."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def read_until(child: subprocess.Popen[str], pattern: str, lines: list[str], timeout: float = 120) -> re.Match[str]:
    """Lines of the child's output until one matches; the child's output is read by a thread into `lines`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in lines:
            if match := re.search(pattern, line):
                return match
        assert child.poll() is None, "".join(lines)[-5000:]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern!r} within {timeout} s:\n" + "".join(lines)[-5000:])


def start_reading(child: subprocess.Popen[str]) -> list[str]:
    import threading

    lines: list[str] = []

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def launch(env: dict[str, str], *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    def before() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-m", "dashboard.launcher", "demo"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=before)


@pytest.fixture
def demo_env(tmp_path: Path, settings: Any) -> Iterator[dict[str, str]]:
    """The environment of a demo on the test database and Redis, its state in tmp_path; every process it
    started is killed afterwards, whatever the test saw."""
    marker = f"LAUNCHER_DIR={tmp_path}"
    # A Redis database of its own, emptied: the suite's broker queue holds tasks other tests sent, which the
    # demo's worker would work through before its first poll.
    redis_url = urlsplit(settings.REDIS_URL)._replace(path="/15").geturl()
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        **os.environ, "LAUNCHER_DIR": str(tmp_path), "DATABASE_URL": subprocess_database_url(),
        "REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url, "SIMULATOR_RATE": "0.1", "PYTHONUNBUFFERED": "1",
        # As `make test` leaves it: an empty key, which the demo must take for none and read its simulator.
        "MORALIS_API_KEY": "",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("METRICS_TOKEN", None)
    yield env
    for pid in demo_processes(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.django_db(transaction=True)
def test_a_demo_started_with_sigint_ignored_stops_on_sigint_and_a_second_start_leaves_it_alone(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    marker = f"LAUNCHER_DIR={tmp_path}"
    with listening() as busy:
        demo_env["PORT"] = str(busy)
        demo_env["SIMULATOR_PORT"] = str(busy + 1)
        child = launch(demo_env, ignore_sigint=True)
        lines = start_reading(child)
        web_port = int(read_until(child, rf"port {busy} is in use: the web server uses port (\d+)", lines)[1])
        site = f"http://127.0.0.1:{web_port}"
        read_until(child, rf"Open      {re.escape(site)}/", lines)
    sim_port = int(read_until(child, r"Simulator http://127\.0\.0\.1:(\d+)", lines)[1])
    token = read_until(child, r"Authorization: Bearer (\S+)\)", lines)[1]
    read_until(child, r"Press Ctrl-C", lines)
    assert sim_port != web_port
    assert httpx.get(f"{site}/healthz", timeout=30).status_code == 200
    # No Celery banner with its queue lines.
    assert not any(".> polls" in line or "[queues]" in line for line in lines), "".join(lines)

    # A second start: refused, told where the first runs, and the first keeps working.
    second = subprocess.run([sys.executable, "-m", "dashboard.launcher", "demo"], cwd=ROOT, env=demo_env,
                            capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert "A demo is already running in this clone" in second.stderr
    assert f"process {child.pid}" in second.stderr and f"{site}/" in second.stderr
    assert "applying migrations" not in second.stdout + second.stderr
    assert child.poll() is None
    assert httpx.get(f"{site}/healthz", timeout=30).status_code == 200

    # /metrics with the token the banner printed: the worker's polls and upstream requests show.
    deadline = time.monotonic() + 90
    names: set[str] = set()
    while time.monotonic() < deadline and not {"dashboard_polls_total", "dashboard_upstream_requests_total"} <= names:
        answer = httpx.get(f"{site}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert answer.status_code == 200
        names = {s.name for f in text_string_to_metric_families(answer.text) for s in f.samples}
        time.sleep(1)
    assert {"dashboard_polls_total", "dashboard_upstream_requests_total"} <= names, "".join(lines)[-3000:]
    assert httpx.get(f"{site}/metrics", timeout=10).status_code == 403

    # Every process the demo started has the demo's mail backend and the shared metrics directory.
    started = [pid for pid in demo_processes(marker) if pid != child.pid]
    assert len(started) >= 4
    for pid in started:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"EMAIL_BACKEND=dashboard.demo_mail.EmailBackend" in environ
        assert f"PROMETHEUS_MULTIPROC_DIR={tmp_path / 'prometheus'}".encode() in environ

    # SIGINT, which the launcher inherited ignored, stops it and everything it started, within seconds.
    stop = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    took = time.monotonic() - stop
    assert child.returncode == 0
    assert took < launcher.STOP_GRACE + 5, took
    time.sleep(0.5)
    assert demo_processes(marker) == []
    assert [line for line in lines if line.startswith("[launcher] stop")] == ["[launcher] stopping\n",
                                                                               "[launcher] stopped\n"]
    assert (tmp_path / "demo.lock").read_text() == ""


@pytest.mark.django_db(transaction=True)
def test_the_processes_of_a_killed_demo_die_with_it_and_the_next_start_is_not_refused(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    marker = f"LAUNCHER_DIR={tmp_path}"
    base = free_run(2)
    demo_env["PORT"], demo_env["SIMULATOR_PORT"] = str(base), str(base + 1)
    child = launch(demo_env)
    lines = start_reading(child)
    read_until(child, r"applying migrations", lines)
    child.kill()
    child.wait()
    deadline = time.monotonic() + 15
    while demo_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert demo_processes(marker) == []
    assert "127.0.0.1" in (tmp_path / "demo.lock").read_text()  # the killed demo's record, stale

    # Started again, it runs: the stale record is no demo, and the ports are free again.
    child = launch(demo_env)
    lines = start_reading(child)
    read_until(child, rf"Open      http://127\.0\.0\.1:{base}/", lines)
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    assert child.returncode == 0
