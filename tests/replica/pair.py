"""A primary and its streaming replica, both private to the tests: the primary is pgserver's embedded Postgres,
the replica a `pg_basebackup -R` of it started from the same binaries, each on its own Unix socket in a
temporary directory. The shared server on 5432 is never touched."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

DATABASE = "dashboard"


def binaries() -> Path | None:
    """pgserver's Postgres binaries, when they include what a replica needs."""
    try:
        from pgserver._commands import POSTGRES_BIN_PATH
    except ImportError:
        return None
    needed = ("postgres", "pg_ctl", "pg_basebackup", "initdb")
    return POSTGRES_BIN_PATH if all((POSTGRES_BIN_PATH / name).exists() for name in needed) else None


class ReplicaPair:
    def __init__(self, base: Path) -> None:
        import pgserver

        bin_dir = binaries()
        assert bin_dir is not None
        self.bin_dir = bin_dir
        self.primary = pgserver.get_server(base / "primary", cleanup_mode="stop")
        # Postgres refuses to run as root; pgserver runs it as its own system user then, and so does the replica.
        self.user: str | None = self.primary.system_user
        socket_dir = self.primary.get_postmaster_info().socket_dir
        assert socket_dir is not None
        self.primary_socket = str(socket_dir)
        with psycopg.connect(self.conninfo(self.primary_socket, "postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        self.replica_dir = base / "replica"
        self.replica_dir.mkdir(mode=0o700)
        if self.user is not None:
            import pwd

            account = pwd.getpwnam(self.user)
            os.chown(self.replica_dir, account.pw_uid, account.pw_gid)
        self._run("pg_basebackup", "-D", str(self.replica_dir), "-R", "-X", "stream", "-c", "fast",
                  "-h", self.primary_socket, "-U", "postgres")
        # The primary's socket is in its data directory: the copy holds its lock file, which names the
        # primary's postmaster.
        for leftover in self.replica_dir.glob(".s.PGSQL.*"):
            leftover.unlink()
        self.start_replica()

    def _run(self, program: str, *args: str) -> None:
        # Output to a file, not a pipe: a started server would hold a pipe open.
        with (self.replica_dir.parent / f"{program}.out").open("a") as out:
            subprocess.run([str(self.bin_dir / program), *args], check=True, stdout=out, stderr=subprocess.STDOUT,
                           user=self.user, timeout=120)

    @staticmethod
    def conninfo(socket_dir: str, name: str = DATABASE) -> str:
        return f"host={socket_dir} user=postgres dbname={name}"

    @staticmethod
    def url(socket_dir: str) -> str:
        return f"postgresql://postgres@{quote(socket_dir, safe='')}/{DATABASE}"

    @property
    def primary_url(self) -> str:
        return self.url(self.primary_socket)

    @property
    def replica_url(self) -> str:
        return self.url(str(self.replica_dir))

    def start_replica(self) -> None:
        self._run("pg_ctl", "-D", str(self.replica_dir), "-w", "-t", "60", "-l", str(self.replica_dir / "server.log"),
                  "-o", f"-h '' -k {self.replica_dir}", "start")

    def stop_replica(self) -> None:
        self._run("pg_ctl", "-D", str(self.replica_dir), "-w", "-m", "fast", "stop")

    def on_primary(self, sql: str, params: Any = None) -> Any:
        with psycopg.connect(self.conninfo(self.primary_socket), autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            row = cursor.fetchone() if cursor.description else None
            return None if row is None else row[0]

    def on_replica(self, sql: str, params: Any = None) -> Any:
        with psycopg.connect(self.conninfo(str(self.replica_dir)), autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(sql, params).fetchone()
            return None if row is None else row[0]

    def _reached(self, position: str, what: str) -> None:
        """Waits until the replica's `position` function passes the primary's WAL as of now."""
        target = self.on_primary("SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + 30
        while not self.on_replica(f"SELECT {position}() >= %s::pg_lsn", [target]):
            assert time.monotonic() < deadline, f"the replica {what}"
            time.sleep(0.05)

    def caught_up(self) -> None:
        """Waits until the replica has replayed everything the primary wrote so far."""
        self._reached("pg_last_wal_replay_lsn", "did not catch up")

    def pause_replay(self) -> None:
        """Replay paused right after a fresh commit replayed, so the replica's lag counts from now."""
        self.on_primary("CREATE TABLE IF NOT EXISTS replica_tick (at timestamptz)")
        self.on_primary("INSERT INTO replica_tick VALUES (now())")
        self.caught_up()
        self.on_replica("SELECT pg_wal_replay_pause()")
        while self.on_replica("SELECT pg_get_wal_replay_pause_state()") != "paused":
            time.sleep(0.05)

    def received_not_replayed(self) -> None:
        """Waits until the replica has received WAL it has not replayed (it lags)."""
        self._reached("pg_last_wal_receive_lsn", "received nothing")

    def resume_replay(self) -> None:
        self.on_replica("SELECT pg_wal_replay_resume()")
        self.caught_up()

    def stop(self) -> None:
        if (self.replica_dir / "postmaster.pid").exists():
            self.stop_replica()
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.primary.pgdata, user=self.primary.system_user, timeout=60)
        self.primary.cleanup()


def environment(**extra: str) -> dict[str, str]:
    """What the app's processes run with: the shared Redis, database settings only from `extra`."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DATABASE_", "REPLICA_", "TEST_DATABASE"))}
    return {**env, "DEBUG": "1", "PYTHONUNBUFFERED": "1", "MORALIS_API_KEY": "", **extra}
