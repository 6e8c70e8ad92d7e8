"""Fixtures for the admin tests: role users, and deliveries stored through the real ingest path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.accounts.roles import STAFF, VIEWERS, assign_role
from tests import factories

TX = "0x" + "1a" * 32
OTHER_TX = "0x" + "2b" * 32
TOPIC = "0x" + "3c" * 32
STREAM = "9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
OTHER_STREAM = "0e0d0c0b-0a09-4807-8605-040302010000"
# Mixed case, as checksummed addresses arrive.
FROM = "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01"
TO = "0x00000000000000000000000000000000000000Ff"
CONTRACT = "0xC0ffee254729296a45a3885639AC7E10F9d54979"
LOG_ADDRESS = "0xDeaDbeefdEAdbeefdEadbEEFdeadbeEFdEaDbeeF"
TRANSFER_FROM = "0x1111111111111111111111111111111111111111"
TRANSFER_TO = "0x2222222222222222222222222222222222222222"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def make_role_user(username: str, role: str) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "correct-horse-battery")
    assign_role(user, role)
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def history_record(
    *,
    stream_id: str = STREAM,
    block: int = 18_400_123,
    minutes_ago: int = 0,
    error: str = "",
    retries: int = 0,
    tag: str = "usdc-transfers",
    txs: list[dict[str, Any]] | None = None,
    logs: list[dict[str, Any]] | None = None,
    transfers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One upstream history record as the contract describes it."""
    date = NOW - timedelta(minutes=minutes_ago)
    return factories.history_record(
        date=date, stream_id=stream_id, tag=tag, webhook_url="https://hooks.example.com/streams", error=error,
        retries=retries, block=block,
        payload={
            "block": {"number": str(block), "hash": "0x" + "ee" * 32, "timestamp": str(int(date.timestamp()))},
            "chainId": "0x1",
            "logs": logs or [],
            "txs": txs or [],
            "txsInternal": [],
            "erc20Transfers": transfers or [],
            "abi": [],
            "retries": retries,
            "confirmed": True,
            "tag": tag,
            "streamId": stream_id,
        },
    )


@pytest.fixture
def staff_client(db: None) -> Client:
    return client_for(make_role_user("staffer", STAFF))


@pytest.fixture
def viewer(db: None) -> User:
    return make_role_user("vera", VIEWERS)


@pytest.fixture
def viewer_client(viewer: User) -> Client:
    return client_for(viewer)


@pytest.fixture
def plain_source(db: None) -> Any:
    return factories.make_source("plain", api_key="plain-source-secret-key-0001")
