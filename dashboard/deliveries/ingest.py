"""Storing upstream history records: batched idempotent upserts keyed by the upstream id, derived data exact.

One batch is one transaction:
1. records are parsed in Python (`records.py`: status, search keys, a digest of the record);
2. their rows are sent with binary COPY into a temporary staging table;
3. one INSERT … SELECT … ON CONFLICT (id, date) DO UPDATE … WHERE the digest differs writes only new and
   changed rows into their week's partition (made first if missing, `partitions.py`) and returns them with their
   previous state;
4. from those rows alone, error group counts are adjusted, the touched (stream, hour) rollups recomputed
   from the stored rows and the streams table updated.

Writers take the write lock (`write_lock.py`), so concurrent batches (two pollers, a backfill, the retention
task) never interleave their derived-data updates: counts and rollups stay exact.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from dashboard.deliveries import metrics
from dashboard.deliveries.grouping import apply_group_changes, group_ids_for
from dashboard.deliveries.models import PERIOD_ORIGIN, ROLLUP_PERIOD, HourlyRollup, PeriodRollup
from dashboard.deliveries.partitions import ensure_partitions
from dashboard.deliveries.records import ParsedRecord, parse_records, raw_json
from dashboard.deliveries.status import DeliveryStatus
from dashboard.deliveries.write_lock import take_write_lock
from dashboard.sources.models import Source

log = logging.getLogger(__name__)

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
    ("is_test", "bool"),
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


def store_records(
    source: Source | int, records: Iterable[dict[str, Any]], *, now: datetime | None = None
) -> StoreResult:
    """Upsert one batch of upstream records in one transaction; unchanged records are not rewritten."""
    result = StoreResult()
    parsed = parse_records(records, result.rejected)
    if parsed:
        store_parsed(source.pk if isinstance(source, Source) else source, parsed, result, now=now)
    if result.rejected:
        log.warning("%d unreadable history records skipped: %s", len(result.rejected), result.rejected[:3])
    metrics.observe(
        source.name if isinstance(source, Source) else str(source), new=result.inserted, changed=result.updated,
        unchanged=result.unchanged, rejected=len(result.rejected),
    )
    return result


def store_parsed(source_id: int, parsed: Sequence[ParsedRecord], result: StoreResult, *, now: datetime | None = None) -> None:
    now = now or timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        ensure_partitions(cursor, (p.date for p in parsed))
        group_ids = group_ids_for(cursor, ((p.error_message, p.date) for p in parsed))
        _copy_to_stage(cursor, source_id, parsed, group_ids, now)
        changed = _upsert_from_stage(cursor)
        _drop_moved(cursor, changed)
        result.unchanged += len(parsed) - len(changed)
        if not changed:
            return
        group_delta: dict[int, int] = defaultdict(int)
        touched: set[tuple[int, str, datetime]] = set()
        for row in changed:
            (_id, src, date, stream_id, status, group_id, existed, old_date, old_stream, old_status, old_group) = row
            touched.add((src, stream_id, HourlyRollup.hour_of(date)))
            if group_id is not None:
                group_delta[group_id] += 1
            if existed:
                result.updated += 1
                touched.add((src, old_stream, HourlyRollup.hour_of(old_date)))
                if old_group is not None:
                    group_delta[old_group] -= 1
                if status != DeliveryStatus.DELIVERED and old_status == DeliveryStatus.DELIVERED:
                    result.new_failures += 1
            else:
                result.inserted += 1
                if status != DeliveryStatus.DELIVERED:
                    result.new_failures += 1
        apply_group_changes(cursor, group_delta)
        refresh_rollups(cursor, touched)
        written = {row[0] for row in changed}
        _update_streams(cursor, source_id, [p for p in parsed if p.id in written])


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
                    p.search_keys, Jsonb(p.tiny_payload, dumps=raw_json),
                    Jsonb(p.payload, dumps=raw_json) if p.payload is not None else None,
                    p.record_hash, now, now, p.is_test,
                )
            )


def _drop_moved(cursor: Any, changed: list[tuple[Any, ...]]) -> None:
    """Delete the old row of a record whose date changed upstream. The key is (id, date), so the upsert
    inserted the record anew; `changed` already counts it as an update from its old state (group counts, both
    hours' rollups), and only the old row is left to go."""
    moved = [(row[0], row[7]) for row in changed if row[6] and row[7] != row[2]]
    if moved:
        cursor.execute(
            """
            DELETE FROM deliveries_delivery d USING unnest(%s::uuid[], %s::timestamptz[]) AS m(id, date)
             WHERE d.id = m.id AND d.date = m.date
            """,
            [[m[0] for m in moved], [m[1] for m in moved]],
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
            SELECT d.id, d.date, d.stream_id, d.status, d.error_group_id, d.retries, d.error_message
              FROM deliveries_delivery d JOIN {STAGE_TABLE} s ON s.id = d.id
        ), written AS (
            INSERT INTO deliveries_delivery AS d ({columns})
            SELECT {columns} FROM {STAGE_TABLE} ORDER BY id
            ON CONFLICT (id, date) DO UPDATE SET {updates}
             WHERE d.record_hash IS DISTINCT FROM EXCLUDED.record_hash
            RETURNING d.id, d.source_id, d.date, d.stream_id, d.status, d.error_group_id, d.retries,
                      d.error_message, d.updated_at
        ), observed AS (
            -- The attempt history as polls see it: a delivery first seen failing, and every later change of
            -- its retries, error text or status. New delivered rows (most of them) write nothing here.
            INSERT INTO deliveries_deliverychange (delivery_id, date, seen_at, retries, status, error_message)
            SELECT w.id, w.date, w.updated_at, w.retries, w.status, w.error_message
              FROM written w LEFT JOIN old o ON o.id = w.id
             WHERE (o.id IS NULL AND w.status <> '{DeliveryStatus.DELIVERED}')
                OR (o.id IS NOT NULL AND (o.retries, o.error_message, o.status)
                                         IS DISTINCT FROM (w.retries, w.error_message, w.status))
        )
        SELECT w.id, w.source_id, w.date, w.stream_id, w.status, w.error_group_id,
               o.id IS NOT NULL, o.date, o.stream_id, o.status, o.error_group_id
          FROM written w LEFT JOIN old o ON o.id = w.id
        """,  # noqa: S608 - table and column names are constants
    )
    return list(cursor.fetchall())


ROLLUP_DIMENSIONS = "source_id, hour, stream_id, tag, webhook_url, chain_id, status, error_group_id, retries"
ROLLUP_TABLES = ("deliveries_hourlyrollup", "deliveries_eventrollup")

# Both rollup tables from one read of the rows: `rows` yields the dimensions and each delivery's decoded
# event names (its `event:` search keys); the hourly rollup sums over them, the event rollup once per name.
_INSERT_ROLLUPS = f"""
WITH grouped AS MATERIALIZED (
    SELECT {ROLLUP_DIMENSIONS}, events, count(*) AS n FROM ({{rows}}) AS src
     GROUP BY {ROLLUP_DIMENSIONS}, events
), hourly AS (
    INSERT INTO deliveries_hourlyrollup ({ROLLUP_DIMENSIONS}, deliveries)
    SELECT {ROLLUP_DIMENSIONS}, sum(n) FROM grouped GROUP BY {ROLLUP_DIMENSIONS}
)
INSERT INTO deliveries_eventrollup ({ROLLUP_DIMENSIONS}, event, deliveries)
SELECT {ROLLUP_DIMENSIONS}, substr(e.key, 7), sum(n)
  FROM grouped CROSS JOIN LATERAL unnest(grouped.events) AS e(key)
 GROUP BY {ROLLUP_DIMENSIONS}, e.key
"""  # noqa: S608 - column and table names are constants
# A delivery's event keys, in key order (the keys are stored sorted and distinct).
_EVENTS = "ARRAY(SELECT k FROM unnest(d.search_keys) AS k WHERE k LIKE 'event:%%' ORDER BY k)"


def refresh_rollups(cursor: Any, touched: set[tuple[int, str, datetime]]) -> None:
    """Recompute the rollup rows (both tables) of every touched (source, stream, hour) from the stored
    deliveries."""
    if not touched:
        return
    keys = sorted(touched)
    params = [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]]
    for table in ROLLUP_TABLES:
        cursor.execute(
            f"""
            DELETE FROM {table} r
             USING unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
             WHERE r.source_id = t.source_id AND r.stream_id = t.stream_id AND r.hour = t.hour
            """,  # noqa: S608 - table names are constants
            params,
        )
    rows = f"""
        SELECT t.source_id, t.hour, t.stream_id, d.tag, d.webhook_url, d.chain_id, d.status,
               d.error_group_id, d.retries, d.events
          FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
          -- LATERAL: one range scan of the (stream_id, date) index per touched hour. A plain join lets the
          -- planner hash the whole table once it is large (~1 s a batch at 2 M rows).
         CROSS JOIN LATERAL (
            SELECT d.tag, d.webhook_url, d.chain_id, d.status, d.error_group_id, d.retries, {_EVENTS} AS events
              FROM deliveries_delivery d
             WHERE d.stream_id = t.stream_id AND d.date >= t.hour AND d.date < t.hour + interval '1 hour'
               AND d.source_id = t.source_id
               -- A test webhook is no chain event: it stays out of the counts every rate and chart reads.
               AND NOT d.is_test
         ) AS d
    """  # noqa: S608 - column names are constants
    cursor.execute(_INSERT_ROLLUPS.format(rows=rows), params)
    periods = sorted({(source, stream, PeriodRollup.period_of(hour)) for source, stream, hour in keys})
    refresh_periods(cursor, periods)


ROLLUP_COLUMNS = "tag, webhook_url, chain_id, status, error_group_id, retries"


# Each period rollup table, the hourly table it sums, and the columns it has beside the shared dimensions.
PERIOD_TABLES = (
    ("deliveries_periodrollup", "deliveries_hourlyrollup", ""),
    ("deliveries_eventperiodrollup", "deliveries_eventrollup", ", event"),
)


def refresh_periods(cursor: Any, keys: Sequence[tuple[int, str, datetime]]) -> None:
    """Recompute the period rollups (both tables) of the given (source, stream, period start) from their
    hourly rollups."""
    params = [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], ROLLUP_PERIOD]
    for table, hourly, extra in PERIOD_TABLES:
        cursor.execute(
            f"""
            DELETE FROM {table} r
             USING unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
             WHERE r.source_id = t.source_id AND r.stream_id = t.stream_id AND r.hour = t.hour
            """,  # noqa: S608 - table names are constants
            params[:3],
        )
        cursor.execute(
            f"""
            INSERT INTO {table} ({ROLLUP_DIMENSIONS}{extra}, deliveries)
            SELECT t.source_id, t.hour, t.stream_id, {ROLLUP_COLUMNS}{extra}, sum(r.deliveries)
              FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
              JOIN {hourly} r
                ON r.stream_id = t.stream_id AND r.hour >= t.hour AND r.hour < t.hour + %s
               AND r.source_id = t.source_id
             GROUP BY t.source_id, t.hour, t.stream_id, {ROLLUP_COLUMNS}{extra}
            """,  # noqa: S608 - table and column names are constants
            params,
        )


def recompute_periods_between(cursor: Any, start: datetime, end: datetime, source_id: int | None = None) -> None:
    """Recompute the period rollups (both tables) of every period overlapping [start, end) from their hourly
    rollups."""
    only = "" if source_id is None else "AND source_id = %(source)s"
    params = {"start": PeriodRollup.period_of(start), "end": end, "source": source_id, "period": ROLLUP_PERIOD,
              "origin": PERIOD_ORIGIN}
    for table, hourly, extra in PERIOD_TABLES:
        cursor.execute(
            f"DELETE FROM {table} WHERE hour >= %(start)s AND hour < %(end)s {only}",  # noqa: S608
            params,
        )
        cursor.execute(
            f"""
            INSERT INTO {table} ({ROLLUP_DIMENSIONS}{extra}, deliveries)
            SELECT source_id, date_bin(%(period)s, hour, %(origin)s), stream_id, {ROLLUP_COLUMNS}{extra},
                   sum(deliveries)
              FROM {hourly}
             WHERE hour >= %(start)s AND hour < %(end)s + %(period)s
                   AND date_bin(%(period)s, hour, %(origin)s) < %(end)s {only}
             GROUP BY source_id, date_bin(%(period)s, hour, %(origin)s), stream_id, {ROLLUP_COLUMNS}{extra}
            """,  # noqa: S608 - table and column names are constants
            params,
        )


def recompute_rollups_between(cursor: Any, start: datetime, end: datetime, source_id: int | None = None) -> int:
    """Recompute the rollups of every (source, stream, hour) holding a delivery dated in [start, end) (hour
    boundaries), as `refresh_rollups` would for those keys, in one pass over the rows; the number of keys."""
    only = "" if source_id is None else "AND source_id = %(source)s"
    params = {"start": start, "end": end, "source": source_id}
    for table in ROLLUP_TABLES:
        cursor.execute(
            f"""
            DELETE FROM {table} r
             USING (SELECT DISTINCT source_id, stream_id, date_trunc('hour', date) AS hour FROM deliveries_delivery
                     WHERE date >= %(start)s AND date < %(end)s {only}) k
             WHERE r.source_id = k.source_id AND r.stream_id = k.stream_id AND r.hour = k.hour
            """,  # noqa: S608 - fixed SQL; values are parameters
            params,
        )
    rows = f"""
        SELECT d.source_id, date_trunc('hour', d.date) AS hour, d.stream_id, d.tag, d.webhook_url, d.chain_id,
               d.status, d.error_group_id, d.retries, {_EVENTS} AS events
          FROM deliveries_delivery d
         WHERE d.date >= %(start)s AND d.date < %(end)s {only} AND NOT d.is_test
    """  # noqa: S608 - column names are constants
    cursor.execute(_INSERT_ROLLUPS.format(rows=rows), params)
    recompute_periods_between(cursor, start, end, source_id)
    cursor.execute(
        f"SELECT count(DISTINCT (source_id, stream_id, hour)) FROM deliveries_hourlyrollup"  # noqa: S608
        f" WHERE hour >= %(start)s AND hour < %(end)s {only}",
        params,
    )
    return int(cursor.fetchone()[0])


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
            tag = CASE WHEN deliveries_stream.last_delivery_at IS NULL
                         OR EXCLUDED.last_delivery_at >= deliveries_stream.last_delivery_at
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
