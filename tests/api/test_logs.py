"""No secret in logs: a token sent good, bad or to a failing endpoint never appears in any log record."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.api.conftest import World, bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_tokens_never_reach_the_logs(world: World, caplog: Any, monkeypatch: Any, settings: Any) -> None:
    settings.DEBUG = True
    secret = token_for(make_user("ops", staff=True), ["read"])
    wrong = secret[:-4] + "AAAA"
    caplog.set_level(logging.DEBUG)
    client = bearer(secret)
    client.get("/api/v1/streams")
    client.get("/api/v1/nothing")
    client.get("/api/v1/deliveries?bogus=1")
    bearer(wrong).get("/api/v1/streams")
    from django.test import Client

    Client(HTTP_AUTHORIZATION=f"Token {secret}").get("/api/v1/streams")

    def broken(now: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("dashboard.api.streams.stream_entries", broken)
    client.get("/api/v1/streams")
    text = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    assert "boom" in text  # the failure is logged, with its request id
    assert secret not in text and wrong not in text and secret[12:30] not in text
