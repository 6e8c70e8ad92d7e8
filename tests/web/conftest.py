"""Factories for the page tests: upstream history records stored through the real ingest path, so
derived columns, error groups and rollups are exactly what the poller would write."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from tests.factories import history_record, make_source

STREAM_A = "11111111-1111-4111-8111-111111111111"
STREAM_B = "22222222-2222-4222-8222-222222222222"
URL_A = "https://hooks.example.com/a"
URL_B = "https://hooks.example.com/b"
TX = "0x" + "ab" * 32
ADDR = "0x" + "cd" * 20
NFT = "0x" + "ef" * 20


def record(
    *,
    date: datetime | None = None,
    stream_id: str = STREAM_A,
    tag: str = "alpha",
    url: str = URL_A,
    error: str = "",
    retries: int = 0,
    chain: str = "0x1",
    confirmed: bool = True,
    block: int = 100,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return history_record(
        date=date, stream_id=stream_id, tag=tag, webhook_url=url, error=error, retries=retries, chain=chain,
        confirmed=confirmed, block=block, payload=payload if payload is not None else default_payload(block, chain),
    )


def default_payload(block: int, chain: str) -> dict[str, Any]:
    return {
        "block": {"number": str(block), "hash": "0x" + "12" * 32, "timestamp": "1700000000"},
        "chainId": chain,
        "logs": [{"logIndex": "1", "transactionHash": TX, "address": ADDR, "data": "0x",
                  "topic0": "0x" + "dd" * 32, "topic1": None, "topic2": None, "topic3": None,
                  "triggers": [{"name": "balance", "value": "42"}]}],
        "txs": [{"hash": TX, "fromAddress": ADDR, "toAddress": NFT, "value": "0", "gas": "21000",
                 "gasPrice": "1", "nonce": "1", "input": "0x", "transactionIndex": "0", "receiptStatus": "1"}],
        "txsInternal": [],
        "nftTransfers": [{"transactionHash": TX, "logIndex": "1", "contract": NFT, "tokenName": "Kitties",
                          "tokenContractType": "ERC721", "tokenId": "7", "amount": "1", "from": ADDR,
                          "to": ADDR, "operator": None, "possibleSpam": False}],
        "abi": [{"type": "event", "name": "Transfer", "anonymous": False,
                 "inputs": [{"type": "address", "name": "from", "indexed": True}]}],
    }


def store(source: Source, *records: dict[str, Any]) -> list[Delivery]:
    result = store_records(source, list(records))
    assert not result.rejected, result.rejected
    return list(Delivery.objects.filter(id__in=[r["id"] for r in records]).newest_first())


@pytest.fixture
def plain_source(db: None) -> Source:
    """A source that is never polled: the tests store records themselves."""
    return make_source("test", last_success_at=timezone.now())


@pytest.fixture
def simulated(source: Source, simulator: Any) -> Source:
    """The simulator's whole visible history, payloads included, stored as the poller would."""
    records = simulator.world.history_records(include_payload=True)
    for start in range(0, len(records), 1000):
        store_records(source, records[start : start + 1000])
    Source.objects.filter(pk=source.pk).update(last_success_at=timezone.now())
    return source
