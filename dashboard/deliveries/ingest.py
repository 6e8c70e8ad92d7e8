"""Storing upstream history records: batched idempotent upserts keyed by the upstream id, derived data exact.

One batch is one transaction:
1. records are parsed in Python (status, error template, search keys, a digest of the record);
2. their rows are sent with binary COPY into a temporary staging table;
3. one INSERT … SELECT … ON CONFLICT (id) DO UPDATE … WHERE the digest differs writes only new and changed
   rows and returns them with their previous state;
4. from those rows alone, error group counts are adjusted, the touched (stream, hour) rollups recomputed
   from the stored rows and the streams table updated.

Writers take one transaction-level advisory lock, so concurrent batches (two pollers, a backfill, the
retention task) never interleave their derived-data updates: counts and rollups stay exact.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from dashboard.deliveries import derive
from dashboard.deliveries.models import DeliveryStatus, Source
from dashboard.upstream.parsing import as_datetime, as_int

log = logging.getLogger(__name__)

# Held for the rest of the transaction by every writer of deliveries and their derived tables.
INGEST_LOCK_KEY = 4_170_031_001

STAGE_TABLE = "deliveries_delivery_stage"

# (column, Postgres type for binary COPY), in COPY order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "uuid"),
    ("source_id", "int8"),
    ("date", "timestamptz"),
    ("stream_id", "varchar"),
    ("tag", "varchar"),
    ("webhook_url", "varchar"),
    ("chain_id", "varchar"),
    ("confirmed", "bool"),
    ("block_number", "int8"),
    ("records", "int4"),
    ("retries", "int4"),
    ("error_message", "text"),
    ("status", "varchar"),
    ("error_group_id", "int8"),
    ("search_keys", "varchar[]"),
    ("tiny_payload", "jsonb"),
    ("payload", "jsonb"),
    ("record_hash", "varchar"),
    ("first_seen_at", "timestamptz"),
    ("updated_at", "timestamptz"),
)
COLUMN_NAMES = [name for name, _type in COLUMNS]
COPY_TYPES = [type_ for _name, type_ in COLUMNS]
# Everything but the key, the owning source and the first-seen time follows the upstream.
UPDATED_COLUMNS = [c for c in COLUMN_NAMES if c not in {"id", "source_id", "first_seen_at"}]


@dataclass
class StoreResult:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    # Records that could not be read (no id, bad date); reported with the reason.
    rejected: list[str] = field(default_factory=list)
    # Deliveries that are failing and were not before: new rows that failed, and rows that went from
    # delivered to failing. What alert evaluation looks at.
    new_failures: int = 0

    def add(self, other: StoreResult) -> None:
        self.inserted += other.inserted
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.rejected.extend(other.rejected)
        self.new_failures += other.new_failures

    @property
    def written(self) -> int:
        return self.inserted + self.updated


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


def _raw(data: bytes) -> bytes:
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
    # as_int reads 3, "3", "03", "3.0", 3.0 and "0x3" alike.
    number = as_int(value)
    if number is None:
        return default
    return number if -(2**63) <= number < 2**63 else default


def _int32(value: Any) -> int:
    number = _int(value, 0) or 0
    return number if -(2**31) <= number < 2**31 else 0


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return None


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


def parse_date(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # Unix seconds or milliseconds, as some JSON encoders send dates.
        return as_datetime(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        date = datetime.fromisoformat(value)
    except ValueError:
        return None
    if date.tzinfo is None:
        date = date.replace(tzinfo=UTC)
    return date


def parse_record(record: dict[str, Any]) -> ParsedRecord:
    record_id = uuid.UUID(str(record["id"]))
    date = parse_date(record.get("date"))
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
    return ParsedRecord(
        id=record_id,
        date=date,
        stream_id=_text(record.get("streamId"), 64),
        tag=_text(record.get("tag"), 255),
        webhook_url=_text(record.get("webhookUrl"), 2048),
        chain_id=_chain_id(tiny.get("chainId") or (payload or {}).get("chainId")),
        confirmed=_bool(tiny.get("confirmed")),
        block_number=block_number,
        records=_int32(tiny.get("records")),
        retries=retries,
        error_message=error_message,
        status=derive.delivery_status(error_message, retries),
        search_keys=derive.search_keys(payload, block_number),
        tiny_payload=json_bytes(tiny),
        payload=json_bytes(payload) if payload is not None else None,
        record_hash=record_hash(record),
    )


def parse_records(records: Iterable[dict[str, Any]], result: StoreResult) -> list[ParsedRecord]:
    """Parsed records, one per id (a batch repeating an id keeps the last copy); bad ones go to `rejected`."""
    parsed: dict[uuid.UUID, ParsedRecord] = {}
    for record in records:
        try:
            item = parse_record(record)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            ident = str(record.get("id", "?"))[:64] if isinstance(record, dict) else "?"
            result.rejected.append(f"{ident}: {exc}")
            continue
        parsed[item.id] = item
    return list(parsed.values())


def store_records(
    source: Source | int, records: Iterable[dict[str, Any]], *, now: datetime | None = None
) -> StoreResult:
    """Upsert one batch of upstream records in one transaction; unchanged records are not rewritten."""
    result = StoreResult()
    parsed = parse_records(records, result)
    if parsed:
        store_parsed(source.pk if isinstance(source, Source) else source, parsed, result, now=now)
    if result.rejected:
        log.warning("%d unreadable history records skipped: %s", len(result.rejected), result.rejected[:3])
    return result


def store_parsed(source_id: int, parsed: Sequence[ParsedRecord], result: StoreResult, *, now: datetime | None = None) -> None:
    now = now or timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [INGEST_LOCK_KEY])
        group_ids = _error_group_ids(cursor, parsed)
        _copy_to_stage(cursor, source_id, parsed, group_ids, now)
        changed = _upsert_from_stage(cursor)
        result.unchanged += len(parsed) - len(changed)
        if not changed:
            return
        group_delta: dict[int, int] = defaultdict(int)
        touched: set[tuple[int, str, datetime]] = set()
        for row in changed:
            (_id, src, date, stream_id, status, group_id, existed, old_date, old_stream, old_status, old_group) = row
            touched.add((src, stream_id, _hour(date)))
            if group_id is not None:
                group_delta[group_id] += 1
            if existed:
                result.updated += 1
                touched.add((src, old_stream, _hour(old_date)))
                if old_group is not None:
                    group_delta[old_group] -= 1
                if status != DeliveryStatus.DELIVERED and old_status == DeliveryStatus.DELIVERED:
                    result.new_failures += 1
            else:
                result.inserted += 1
                if status != DeliveryStatus.DELIVERED:
                    result.new_failures += 1
        _apply_group_changes(cursor, group_delta)
        _refresh_rollups(cursor, touched)
        written = {row[0] for row in changed}
        _update_streams(cursor, source_id, [p for p in parsed if p.id in written])


def _hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def _error_group_ids(cursor: Any, parsed: Sequence[ParsedRecord]) -> dict[str, int]:
    """Error group id per error message of the batch, creating the groups that do not exist yet."""
    templates: dict[str, tuple[str, str, datetime, datetime]] = {}
    message_fp: dict[str, str] = {}
    for item in parsed:
        if not item.error_message:
            continue
        fp = message_fp.get(item.error_message)
        if fp is None:
            template = derive.error_template(item.error_message)
            fp = derive.error_fingerprint(template)
            message_fp[item.error_message] = fp
        seen = templates.get(fp)
        if seen is None:
            templates[fp] = (fp, derive.error_template(item.error_message), item.date, item.date)
        else:
            templates[fp] = (fp, seen[1], min(seen[2], item.date), max(seen[3], item.date))
    if not templates:
        return {}
    fps = sorted(templates)
    cursor.execute(
        """
        INSERT INTO deliveries_errorgroup (fingerprint, template, first_seen, last_seen, delivery_count)
        SELECT fp, template, first_seen, last_seen, 0
          FROM unnest(%s::varchar[], %s::text[], %s::timestamptz[], %s::timestamptz[])
               AS t(fp, template, first_seen, last_seen)
        ON CONFLICT (fingerprint) DO NOTHING
        """,
        [fps, [templates[f][1] for f in fps], [templates[f][2] for f in fps], [templates[f][3] for f in fps]],
    )
    cursor.execute("SELECT fingerprint, id FROM deliveries_errorgroup WHERE fingerprint = ANY(%s::varchar[])", [fps])
    by_fp = dict(cursor.fetchall())
    return {message: by_fp[fp] for message, fp in message_fp.items()}


def _copy_to_stage(
    cursor: Any, source_id: int, parsed: Sequence[ParsedRecord], group_ids: dict[str, int], now: datetime
) -> None:
    cursor.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {STAGE_TABLE} "
        "(LIKE deliveries_delivery INCLUDING DEFAULTS INCLUDING COMPRESSION) ON COMMIT DELETE ROWS"
    )
    # Normally empty already (ON COMMIT DELETE ROWS); a savepoint rolled back mid-batch can leave rows.
    cursor.execute(f"TRUNCATE {STAGE_TABLE}")
    raw = cursor.cursor  # the psycopg cursor under Django's wrapper, inside the same transaction
    columns = ", ".join(COLUMN_NAMES)
    with raw.copy(f"COPY {STAGE_TABLE} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(COPY_TYPES)
        for p in parsed:
            copy.write_row(
                (
                    p.id, source_id, p.date, p.stream_id, p.tag, p.webhook_url, p.chain_id, p.confirmed,
                    p.block_number, p.records, p.retries, p.error_message, p.status,
                    group_ids.get(p.error_message) if p.error_message else None,
                    p.search_keys, Jsonb(p.tiny_payload, dumps=_raw),
                    Jsonb(p.payload, dumps=_raw) if p.payload is not None else None,
                    p.record_hash, now, now,
                )
            )


def _upsert_from_stage(cursor: Any) -> list[tuple[Any, ...]]:
    """Insert new rows and rewrite changed ones; return those rows with their previous state."""
    columns = ", ".join(COLUMN_NAMES)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in UPDATED_COLUMNS)
    # All parts of one statement see the same snapshot: `old` is the state before the upsert.
    # Rows are written in id order so that two writers never lock rows in opposite orders.
    cursor.execute(
        f"""
        WITH old AS (
            SELECT d.id, d.date, d.stream_id, d.status, d.error_group_id
              FROM deliveries_delivery d JOIN {STAGE_TABLE} s ON s.id = d.id
        ), written AS (
            INSERT INTO deliveries_delivery AS d ({columns})
            SELECT {columns} FROM {STAGE_TABLE} ORDER BY id
            ON CONFLICT (id) DO UPDATE SET {updates}
             WHERE d.record_hash IS DISTINCT FROM EXCLUDED.record_hash
            RETURNING d.id, d.source_id, d.date, d.stream_id, d.status, d.error_group_id
        )
        SELECT w.id, w.source_id, w.date, w.stream_id, w.status, w.error_group_id,
               o.id IS NOT NULL, o.date, o.stream_id, o.status, o.error_group_id
          FROM written w LEFT JOIN old o ON o.id = w.id
        """,  # noqa: S608 - table and column names are constants
    )
    return list(cursor.fetchall())


def _apply_group_changes(cursor: Any, delta: dict[int, int]) -> None:
    """Adjust counts by what moved in or out, and re-read first/last seen from the (group, date) index."""
    if not delta:
        return
    ids = sorted(delta)
    cursor.execute(
        """
        UPDATE deliveries_errorgroup g
           SET delivery_count = g.delivery_count + v.delta,
               first_seen = COALESCE(
                   (SELECT min(d.date) FROM deliveries_delivery d WHERE d.error_group_id = g.id), g.first_seen),
               last_seen = COALESCE(
                   (SELECT max(d.date) FROM deliveries_delivery d WHERE d.error_group_id = g.id), g.last_seen)
          FROM unnest(%s::bigint[], %s::int[]) AS v(id, delta)
         WHERE g.id = v.id
        """,
        [ids, [delta[i] for i in ids]],
    )


ROLLUP_DIMENSIONS = "source_id, hour, stream_id, tag, webhook_url, chain_id, status, error_group_id, retries"


def _refresh_rollups(cursor: Any, touched: set[tuple[int, str, datetime]]) -> None:
    """Recompute the rollup rows of every touched (source, stream, hour) from the stored deliveries."""
    if not touched:
        return
    keys = sorted(touched)
    params = [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]]
    cursor.execute(
        """
        DELETE FROM deliveries_hourlyrollup r
         USING unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
         WHERE r.source_id = t.source_id AND r.stream_id = t.stream_id AND r.hour = t.hour
        """,
        params,
    )
    cursor.execute(
        f"""
        INSERT INTO deliveries_hourlyrollup ({ROLLUP_DIMENSIONS}, deliveries)
        SELECT d.source_id, t.hour, d.stream_id, d.tag, d.webhook_url, d.chain_id, d.status,
               d.error_group_id, d.retries, count(*)
          FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
          JOIN deliveries_delivery d
            ON d.source_id = t.source_id AND d.stream_id = t.stream_id
           AND d.date >= t.hour AND d.date < t.hour + interval '1 hour'
         GROUP BY d.source_id, t.hour, d.stream_id, d.tag, d.webhook_url, d.chain_id, d.status,
                  d.error_group_id, d.retries
        """,  # noqa: S608 - column names are constants
        params,
    )


def _update_streams(cursor: Any, source_id: int, written: Sequence[ParsedRecord]) -> None:
    streams: dict[str, dict[str, Any]] = {}
    for p in written:
        entry = streams.get(p.stream_id)
        if entry is None:
            streams[p.stream_id] = {"tag": p.tag, "urls": {p.webhook_url}, "chains": {p.chain_id},
                                    "first": p.date, "last": p.date}
            continue
        entry["urls"].add(p.webhook_url)
        entry["chains"].add(p.chain_id)
        entry["first"] = min(entry["first"], p.date)
        if p.date >= entry["last"]:
            entry["last"] = p.date
            entry["tag"] = p.tag
    ids = sorted(streams)
    cursor.execute(
        """
        INSERT INTO deliveries_stream
               (source_id, stream_id, tag, webhook_urls, chain_ids, first_delivery_at, last_delivery_at)
        SELECT %s, t.stream_id, t.tag, string_to_array(t.urls, E'\\x1f')::varchar[],
               string_to_array(t.chains, E'\\x1f')::varchar[], t.first, t.last
          FROM unnest(%s::varchar[], %s::varchar[], %s::text[], %s::text[], %s::timestamptz[], %s::timestamptz[])
               AS t(stream_id, tag, urls, chains, first, last)
        ON CONFLICT (source_id, stream_id) DO UPDATE SET
            tag = CASE WHEN EXCLUDED.last_delivery_at >= deliveries_stream.last_delivery_at
                       THEN EXCLUDED.tag ELSE deliveries_stream.tag END,
            webhook_urls = ARRAY(SELECT DISTINCT u FROM unnest(deliveries_stream.webhook_urls
                                 || EXCLUDED.webhook_urls) AS u WHERE u <> '' ORDER BY u),
            chain_ids = ARRAY(SELECT DISTINCT c FROM unnest(deliveries_stream.chain_ids
                              || EXCLUDED.chain_ids) AS c WHERE c <> '' ORDER BY c),
            first_delivery_at = LEAST(deliveries_stream.first_delivery_at, EXCLUDED.first_delivery_at),
            last_delivery_at = GREATEST(deliveries_stream.last_delivery_at, EXCLUDED.last_delivery_at)
        """,
        [
            source_id,
            ids,
            [streams[s]["tag"] for s in ids],
            ["\x1f".join(sorted(u for u in streams[s]["urls"] if u)) for s in ids],
            ["\x1f".join(sorted(c for c in streams[s]["chains"] if c)) for s in ids],
            [streams[s]["first"] for s in ids],
            [streams[s]["last"] for s in ids],
        ],
    )


def recount_error_groups() -> None:
    """Recompute every group's count and first/last seen from the stored rows (repair; not on the hot path)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [INGEST_LOCK_KEY])
        cursor.execute(
            """
            UPDATE deliveries_errorgroup g
               SET delivery_count = COALESCE(s.n, 0),
                   first_seen = COALESCE(s.first_seen, g.first_seen),
                   last_seen = COALESCE(s.last_seen, g.last_seen)
              FROM deliveries_errorgroup g2
              LEFT JOIN (
                SELECT error_group_id, count(*) AS n, min(date) AS first_seen, max(date) AS last_seen
                  FROM deliveries_delivery WHERE error_group_id IS NOT NULL GROUP BY error_group_id
              ) s ON s.error_group_id = g2.id
             WHERE g.id = g2.id
            """
        )


def rollup_window(now: datetime, days: int) -> datetime:
    return _hour(now - timedelta(days=days))
