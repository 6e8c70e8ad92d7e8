"""Settings come from the environment and fail loudly on bad values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_check(**overrides: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"SECRET_KEY": "x" * 50, **overrides})
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("POLL_INTERVAL_SECONDS", "soon", "POLL_INTERVAL_SECONDS must be an integer, got 'soon'"),
        ("POLL_INTERVAL_SECONDS", "0", "POLL_INTERVAL_SECONDS must be at least 1, got 0"),
        ("DEBUG", "maybe", "DEBUG must be a boolean"),
        ("DATABASE_URL", "mysql://db/x", "DATABASE_URL must be a URL starting with postgres:// or postgresql://"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must be a URL starting with redis://"),
        ("MORALIS_STREAMS_BASE_URL", "api.moralis-streams.com", "MORALIS_STREAMS_BASE_URL must be a URL"),
        ("HISTORY_RETENTION_DAYS", "3", "HISTORY_RETENTION_DAYS must be at least 8"),
    ],
)
def test_it_rejects_bad_values_with_a_clear_message(name: str, value: str, expected: str) -> None:
    result = run_check(**{name: value})
    assert result.returncode == 2
    assert f"Configuration error: {expected}" in result.stderr
    assert "Traceback" not in result.stderr


def test_it_requires_a_secret_key_in_production() -> None:
    result = run_check(SECRET_KEY="", DEBUG="0")
    assert result.returncode == 2
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_it_never_echoes_a_database_url_that_may_hold_a_password() -> None:
    result = run_check(DATABASE_URL="mysql://admin:hunter2@db/x")
    assert result.returncode == 2
    assert "hunter2" not in result.stderr


def test_it_accepts_good_values() -> None:
    result = run_check(POLL_INTERVAL_SECONDS="30", DEBUG="false", ALLOWED_HOSTS="dash.example.com")
    assert result.returncode == 0, result.stderr
