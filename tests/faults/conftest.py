"""The private stack each fault test runs on: its own Postgres and Redis, a freshly migrated database."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.stack import ROOT, PrivatePostgres, PrivateRedis, Stack

TEMPLATE = "faults_template"
_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def private_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivatePostgres]:
    # Its own INFO lines would also go to a closed stream from its exit hook.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    postgres = PrivatePostgres(tmp_path_factory.mktemp("pgdata"))
    postgres.create_database(TEMPLATE)
    # Migrated once, by the app itself in a child process; each test copies it.
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "DEBUG": "1", "DATABASE_URL": postgres.url(TEMPLATE)}, timeout=300,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    yield postgres
    postgres.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    redis = PrivateRedis(tmp_path)
    yield redis
    redis.stop()


@pytest.fixture
def stack(private_postgres: PrivatePostgres, private_redis: PrivateRedis, tmp_path: Path,
          django_db_blocker: Any) -> Iterator[Stack]:
    name = f"faults_{next(_numbers)}"
    private_postgres.create_database(name, template=TEMPLATE)
    running = Stack(private_postgres, private_redis, name, tmp_path)
    with django_db_blocker.unblock():
        yield running
    running.stop_children()
