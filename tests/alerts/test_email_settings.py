"""Mail settings come from EMAIL_URL or the separate EMAIL_* variables and fail loudly when malformed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SHOW = (
    "from django.conf import settings as s; "
    "print(s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_HOST_USER, s.EMAIL_HOST_PASSWORD, s.EMAIL_USE_TLS, s.EMAIL_USE_SSL)"
)


def run(code: str = SHOW, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("EMAIL_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env.update({"SECRET_KEY": "x" * 50, **overrides})
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_email_url_sets_host_port_credentials_and_tls() -> None:
    result = run(EMAIL_URL="submission://alerts%40example.com:s3cr%2Ft@smtp.example.com")
    assert result.stdout.split() == [
        "smtp.example.com",
        "587",
        "alerts@example.com",
        "s3cr/t",
        "True",
        "False",
    ]
    result = run(EMAIL_URL="smtps://u:p@mail.example.com:2465")
    assert result.stdout.split() == ["mail.example.com", "2465", "u", "p", "False", "True"]


def test_the_separate_variables_apply_without_email_url() -> None:
    result = run(
        EMAIL_HOST="relay.internal", EMAIL_PORT="2525", EMAIL_HOST_USER="me", EMAIL_HOST_PASSWORD="pw"
    )
    assert result.stdout.split() == ["relay.internal", "2525", "me", "pw", "False", "False"]


def test_a_malformed_email_url_is_named_without_echoing_it() -> None:
    result = run(EMAIL_URL="http://user:hunter2@smtp.example.com")
    assert result.returncode != 0
    assert "EMAIL_URL must be a URL starting with smtp://" in result.stderr
    assert "hunter2" not in result.stderr


def test_alert_settings_are_typed() -> None:
    result = run(ALERT_MAX_MAILS_PER_HOUR="lots")
    assert "ALERT_MAX_MAILS_PER_HOUR must be an integer" in result.stderr
    result = run(
        "from django.conf import settings as s; print(s.ALERT_EMAILS)",
        ALERT_EMAILS="a@example.com, b@example.com",
    )
    assert result.stdout.strip() == "['a@example.com', 'b@example.com']"
