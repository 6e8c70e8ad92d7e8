"""Reading one upstream history record into the row it becomes: typed columns, status, search keys and a
digest of the record as received. No database access; `ingest` writes what this returns."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from dashboard.deliveries.latency import latency_ms
from dashboard.deliveries.payload_keys import search_keys
from dashboard.deliveries.status import delivery_status
from dashboard.upstream.parsing import as_bool, as_datetime, as_int


@dataclass
class ParsedRecord:
    id: uuid.UUID
    date: datetime
    stream_id: str
    tag: str
    webhook_url: str
    chain_id: str
    confirmed: bool | None
    block_number: int | None
    records: int
    retries: int
    error_message: str
    status: str
    search_keys: list[str]
    tiny_payload: bytes
    payload: bytes | None
    record_hash: str
    # The provider's test webhook (sent after a stream is created, updated or reactivated): no chain, no block.
    is_test: bool = False
    # When the block was mined (`payload.block.timestamp`; the tinyPayload has none, so a record read with
    # excludePayload has none either) and the processing latency, `date` − block time (latency.py).
    block_time: datetime | None = None
    latency_ms: int | None = None


def raw_json(data: bytes) -> bytes:
    """A `dumps` for values that are already serialised JSON (psycopg then sends the bytes as they are)."""
    return data


_ESCAPED_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def json_bytes(value: Any) -> bytes:
    """orjson serialisation that Postgres jsonb accepts: no lone surrogates, no \\u0000."""
    try:
        data = orjson.dumps(value)
    except orjson.JSONEncodeError:
        data = orjson.dumps(_clean_json(value))
    if b"\\u0000" in data:
        data = _ESCAPED_NUL.sub(rb"\1\\ufffd", data)
    return data


def _clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_clean_json(str(k)): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**64:
        return str(value)
    return value


def _text(value: Any, limit: int | None = None) -> str:
    """A text column value: Postgres refuses NUL characters and lone surrogates."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text[:limit] if limit else text


def record_hash(record: dict[str, Any]) -> str:
    try:
        data = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        data = orjson.dumps(_clean_json(record), option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _int(value: Any, default: int | None = 0) -> int | None:
    """A bigint column value: as_int reads 3, "3", "03", "3.0", 3.0 and "0x3" alike; out of range is `default`."""
    number = as_int(value)
    if number is None:
        return default
    return number if -(2**63) <= number < 2**63 else default


def _int32(value: Any) -> int:
    number = _int(value, 0) or 0
    return number if -(2**31) <= number < 2**31 else 0


_DECIMAL = re.compile(r"^\s*\d{1,20}\s*$")


def _chain_id(value: Any) -> str:
    """Chain ids as the filters and explorer links expect them: hex ("0x89"), also when sent as 137 or "137"."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return hex(value)
    if isinstance(value, str):
        if _DECIMAL.match(value):
            return hex(int(value))
        if value[:2] in ("0X", "0x"):
            return _text(value.strip().lower(), 32)
    return _text(value, 32)


def parse_record(record: dict[str, Any]) -> ParsedRecord:
    record_id = uuid.UUID(str(record["id"]))
    date = as_datetime(record.get("date"))
    if date is None:
        raise ValueError("no readable date")
    raw_tiny = record.get("tinyPayload")
    tiny: dict[str, Any] = raw_tiny if isinstance(raw_tiny, dict) else {}
    raw_payload = record.get("payload")
    payload: dict[str, Any] | None = raw_payload if isinstance(raw_payload, dict) else None
    error_message = _text(record.get("errorMessage"))
    retries = _int(tiny.get("retries"), None)
    if retries is None and payload is not None:
        retries = _int(payload.get("retries"), None)
    retries = max(0, min(retries or 0, 2**31 - 1))
    block_number = _int(tiny.get("block"), None)
    if block_number is None and payload is not None and isinstance(payload.get("block"), dict):
        block_number = _int(payload["block"].get("number"), None)
    chain_id = _chain_id(tiny.get("chainId") or (payload or {}).get("chainId"))
    block_time = _block_time(payload)
    return ParsedRecord(
        id=record_id,
        date=date,
        stream_id=_text(record.get("streamId"), 64),
        tag=_text(record.get("tag"), 255),
        webhook_url=_text(record.get("webhookUrl"), 2048),
        chain_id=chain_id,
        confirmed=as_bool(tiny.get("confirmed")),
        block_number=block_number,
        records=_int32(tiny.get("records")),
        retries=retries,
        error_message=error_message,
        status=delivery_status(error_message, retries),
        search_keys=search_keys(payload, block_number),
        tiny_payload=json_bytes(tiny),
        payload=json_bytes(payload) if payload is not None else None,
        record_hash=record_hash(record),
        is_test=chain_id == "" and block_number is None,
        block_time=block_time,
        latency_ms=latency_ms(date, block_time),
    )


def _block_time(payload: dict[str, Any] | None) -> datetime | None:
    """The block's timestamp (Unix seconds, a string or a number); None when missing, zero or unreadable."""
    block = payload.get("block") if payload is not None else None
    if not isinstance(block, dict):
        return None
    timestamp = block.get("timestamp")
    if timestamp in (None, "", 0, "0") or isinstance(timestamp, bool):
        return None
    moment = as_datetime(timestamp)
    return moment if moment is not None and moment.year >= 2000 else None


def parse_records(records: Iterable[dict[str, Any]], rejected: list[str]) -> list[ParsedRecord]:
    """Parsed records, one per id (a batch repeating an id keeps the last copy); bad ones go to `rejected`."""
    parsed: dict[uuid.UUID, ParsedRecord] = {}
    for record in records:
        try:
            item = parse_record(record)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            ident = str(record.get("id", "?"))[:64] if isinstance(record, dict) else "?"
            rejected.append(f"{ident}: {exc}")
            continue
        parsed[item.id] = item
    return list(parsed.values())
