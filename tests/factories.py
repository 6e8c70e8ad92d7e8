"""Plain factory functions every suite shares: a source row and upstream history records shaped as the
contract describes them, stored through the real write path so derived data is what the poller writes.

Suites keep their own small defaults (a stream id, a tag, a payload) in thin wrappers; the shape of a
record and of a source is written here once.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from dashboard.deliveries.ingest import StoreResult, store_records
from dashboard.sources.models import Source

# Nothing listens on port 9: a source that must never reach an upstream points there.
NOWHERE = "http://127.0.0.1:9"
_NO_PAYLOAD: Any = object()


def make_source(name: str = "source", *, base_url: str = NOWHERE, api_key: str = "k", **fields: Any) -> Source:
    """A source whose hosts are all `base_url` (the Aptos ones under /aptos/mainnet and /aptos/testnet,
    as the simulator serves them); any field can be overridden."""
    values: dict[str, Any] = {
        "streams_base_url": base_url,
        "evm_base_url": base_url,
        "aptos_mainnet_base_url": f"{base_url}/aptos/mainnet",
        "aptos_testnet_base_url": f"{base_url}/aptos/testnet",
    }
    values.update(fields)
    return Source.objects.create(name=name, api_key=api_key, **values)


def history_record(
    *,
    date: datetime | None = None,
    record_id: str | uuid.UUID | None = None,
    stream_id: str = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11",
    tag: str = "orders",
    webhook_url: str = "https://hooks.example.com/moralis",
    error: str = "",
    retries: int = 0,
    chain: str = "0x1",
    confirmed: bool = True,
    block: int = 19_000_000,
    records: int = 1,
    payload: dict[str, Any] | None = _NO_PAYLOAD,
) -> dict[str, Any]:
    """One /history record. Without `payload` the record carries none (as with `includePayload=false`)."""
    date = date or timezone.now() - timedelta(minutes=5)
    record: dict[str, Any] = {
        "id": str(record_id or uuid.uuid4()),
        "date": date.isoformat().replace("+00:00", "Z"),
        "tinyPayload": {"chainId": chain, "confirmed": confirmed, "block": str(block), "records": records,
                        "retries": retries},
        "errorMessage": error,
        "webhookUrl": webhook_url,
        "streamId": stream_id,
        "tag": tag,
    }
    if payload is not _NO_PAYLOAD:
        record["payload"] = payload
    return record


def store(source: Source, *records: dict[str, Any]) -> StoreResult:
    return store_records(source, list(records))


def source_for(simulator: Any, name: str = "sim", **fields: Any) -> Source:
    """A source reading the given simulator with the key it accepts."""
    from tests.conftest import SIMULATOR_KEY

    fields.setdefault("api_key", SIMULATOR_KEY)
    return make_source(name, base_url=simulator.base_url, **fields)
