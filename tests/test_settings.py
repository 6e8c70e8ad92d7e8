"""Settings come from the environment and fail loudly on bad values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def deploy_settings(**overrides: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"SECRET_KEY": "k" * 60, "DEBUG": "0", "ALLOWED_HOSTS": "dash.example.com", **overrides})
    script = (
        "import json; from django.conf import settings as s; print(json.dumps({n: getattr(s, n, None) for n in ("
        "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SESSION_COOKIE_HTTPONLY', 'X_FRAME_OPTIONS',"
        "'SECURE_CONTENT_TYPE_NOSNIFF', 'SECURE_REFERRER_POLICY', 'SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS',"
        "'SECURE_PROXY_SSL_HEADER', 'SESSION_COOKIE_AGE')}))"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    import json

    values: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return values


def test_an_https_site_gets_secure_cookies_redirects_and_hsts_without_extra_settings() -> None:
    values = deploy_settings(SITE_URL="https://dash.example.com")
    assert values == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "X_FRAME_OPTIONS": "DENY",
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "SECURE_REFERRER_POLICY": "same-origin",
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 365 * 86400,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SESSION_COOKIE_AGE": 12 * 3600,
    }


def test_a_plain_http_site_neither_redirects_nor_sends_hsts() -> None:
    values = deploy_settings(SITE_URL="http://dash.example.com")
    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["SECURE_PROXY_SSL_HEADER"] is None
    assert values["SESSION_COOKIE_SECURE"] is False


def test_the_https_defaults_can_be_turned_off_one_by_one() -> None:
    values = deploy_settings(
        SITE_URL="https://dash.example.com", SECURE_SSL_REDIRECT="0", SECURE_HSTS_SECONDS="0",
        SECURE_PROXY_SSL_HEADER="0",
    )
    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["SECURE_PROXY_SSL_HEADER"] is None


def test_the_deploy_check_leaves_only_the_domain_wide_hsts_choices_to_the_operator() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    secret = "".join(chr(33 + n % 90) for n in range(60))  # long and varied enough for the key check
    env.update({"SECRET_KEY": secret, "DEBUG": "0", "ALLOWED_HOSTS": "dash.example.com",
                "SITE_URL": "https://dash.example.com"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )
    warnings = sorted(set(re.findall(r"security\.W\d+", result.stdout + result.stderr)))
    # Subdomains and the preload list concern hosts beyond this one.
    assert warnings == ["security.W005", "security.W021"]


@pytest.mark.django_db
def test_the_health_endpoint_answers_plain_http_probes_behind_the_redirect(settings: Any) -> None:
    from django.test import Client

    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client()
    assert client.get("/healthz").status_code == 200
    page = client.get("/deliveries/")
    assert page.status_code == 301 and page["Location"].startswith("https://")
    secure = client.get("/deliveries/", headers={"X-Forwarded-Proto": "https"})
    assert secure.status_code == 302 and secure["Location"].startswith("/accounts/login/")


def test_the_deploy_check_is_clean_with_production_settings() -> None:
    # DJANGO_ALLOW_ASYNC_UNSAFE is the browser tests' own (Playwright's loop in the test thread), not production's.
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    secret = "".join(chr(33 + n % 90) for n in range(60))
    env.update({"SECRET_KEY": secret, "DEBUG": "0", "ALLOWED_HOSTS": "dash.example.com",
                "SITE_URL": "https://dash.example.com", "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
                "SECURE_HSTS_PRELOAD": "1"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_sessions_expire_after_the_configured_age() -> None:
    values = deploy_settings(SESSION_MAX_AGE_SECONDS="3600")
    assert values["SESSION_COOKIE_AGE"] == 3600
    assert deploy_settings()["SESSION_COOKIE_AGE"] == 12 * 3600
