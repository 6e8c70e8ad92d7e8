"""Storing upstream history records: batched idempotent upserts keyed by the upstream id, derived data exact.

One batch is one transaction:
1. records are parsed in Python (`records.py`: status, search keys, a digest of the record), by `parse_batch`,
   apart from the rest, so a walk parses its next page while this one is stored;
2. the digests already stored under the batch's ids are read: a record stored with the same digest is
   unchanged and not written again;
3. records whose id is not stored yet (most of a poll's) are sent with binary COPY straight into the
   deliveries table, each row to its week's partition (made first if missing, `partitions.py`);
4. records stored with another digest (a retry, a changed status) are sent with binary COPY into a temporary
   staging table, and one INSERT … SELECT … ON CONFLICT (id, date) DO UPDATE rewrites them and returns them
   with their previous state;
5. from the written rows alone (and the rows they replaced), error group counts and the rollups are adjusted
   (a delivery added under its dimensions, a replaced row taken away under its own: no hour's rows are read
   again; `rollup_upkeep.py`) and the streams table updated.

Writers take the write lock (`write_lock.py`), so concurrent batches (two pollers, a backfill, the retention
task) never interleave their derived-data updates: counts and rollups stay exact, and no row can be stored
under a batch's ids between step 2 and the writes that follow it.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from dashboard.deliveries import metrics
from dashboard.deliveries.grouping import apply_group_changes, group_ids_for
from dashboard.deliveries.latency import BUCKETS, bucket_of
from dashboard.deliveries.models import HourlyRollup
from dashboard.deliveries.partitions import ensure_partitions
from dashboard.deliveries.payload_keys import event_names
from dashboard.deliveries.querysets import array_literal
from dashboard.deliveries.records import ParsedRecord, parse_records, raw_json
from dashboard.deliveries.rollup_upkeep import EVENT_KEYS, RollupDelta, add_to_rollups, rollup_delta
from dashboard.deliveries.status import DeliveryStatus
from dashboard.deliveries.write_lock import take_write_lock
from dashboard.sources.models import Source

log = logging.getLogger(__name__)
T = TypeVar("T")

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
    ("block_time", "timestamptz"),
    ("latency_ms", "int4"),
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
    # Deliveries failing before and still failing after one more failed attempt (their retry count grew): a new
    # failed attempt at the provider, which alert evaluation looks at too.
    failed_retries: int = 0

    def add(self, other: StoreResult) -> None:
        self.inserted += other.inserted
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.rejected.extend(other.rejected)
        self.new_failures += other.new_failures
        self.failed_retries += other.failed_retries

    @property
    def written(self) -> int:
        return self.inserted + self.updated


@dataclass
class ParsedBatch:
    """A batch of records read in Python (step 1), before anything is sent to the database. A walk reads its
    next page into one while the database stores this one (`polling/walks.py`)."""

    records: list[ParsedRecord]
    # Records that could not be read, with the reason.
    rejected: list[str]


def parse_batch(records: Iterable[dict[str, Any]]) -> ParsedBatch:
    rejected: list[str] = []
    return ParsedBatch(parse_records(records, rejected), rejected)


def store_records(
    source: Source | int, records: Iterable[dict[str, Any]], *, now: datetime | None = None
) -> StoreResult:
    """Upsert one batch of upstream records in one transaction; unchanged records are not rewritten."""
    return store_batch(source, parse_batch(records), now=now)


def store_batch(source: Source | int, batch: ParsedBatch, *, now: datetime | None = None) -> StoreResult:
    """`store_records` of a batch parsed beforehand (`parse_batch`)."""
    result = StoreResult(rejected=list(batch.rejected))
    parsed = batch.records
    if parsed:
        store_parsed(source.pk if isinstance(source, Source) else source, parsed, result, now=now)
    if result.rejected:
        log.warning("%d unreadable history records skipped: %s", len(result.rejected), result.rejected[:3])
    metrics.observe(
        source.name if isinstance(source, Source) else str(source), new=result.inserted, changed=result.updated,
        unchanged=result.unchanged, rejected=len(result.rejected),
    )
    return result


class Counted(NamedTuple):
    """What the rollups count of one delivery row: its dimensions and decoded event names."""

    source_id: int
    date: datetime
    stream_id: str
    tag: str
    webhook_url: str
    chain_id: str
    status: str
    error_group_id: int | None
    retries: int
    events: tuple[str, ...]
    is_test: bool
    # Where the delivery counts in the rollups' latency histograms (`latency_slot`); None without a latency.
    latency_slot: int | None = None


def latency_slot(latency_ms: int | None, confirmed: bool | None) -> int | None:
    """A delivery's place in a rollup row's two latency histograms laid end to end: its bucket, plus BUCKETS
    when it is confirmed."""
    if latency_ms is None:
        return None
    return bucket_of(latency_ms) + (BUCKETS if confirmed else 0)


class Written(NamedTuple):
    """A row the batch wrote, with the row it replaced (None for a new delivery)."""

    id: uuid.UUID
    row: Counted
    old: Counted | None


def store_parsed(source_id: int, parsed: Sequence[ParsedRecord], result: StoreResult, *, now: datetime | None = None) -> None:
    now = now or timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        ensure_partitions(cursor, (p.date for p in parsed))
        group_ids = group_ids_for(cursor, ((p.error_message, p.date) for p in parsed))
        stored = _stored_digests(cursor, [p.id for p in parsed])
        new = [p for p in parsed if p.id not in stored]
        rewritten = [p for p in parsed if p.id in stored and stored[p.id] != p.record_hash]
        changes = BatchChanges(source_id)
        if new:
            _insert_new(cursor, source_id, new, group_ids, now, changes, last=not rewritten)
        if rewritten:
            _copy_to_stage(cursor, source_id, rewritten, group_ids, now)
            written = _upsert_from_stage(cursor, {p.id: p for p in rewritten})
            _drop_moved(cursor, written)
            for w in written:
                changes.add(w)
        result.unchanged += len(parsed) - changes.written
        if changes.written:
            changes.apply(cursor, result)
    metrics.observe_latencies(new)


class BatchChanges:
    """What a batch's written rows change beside themselves: the error groups' counts and spans, the rollups and
    the streams, each gathered row by row and sent in one statement apiece by `apply`. New rows are gathered
    while the server still stores them (`copy_rows`'s `meanwhile`), so this Python work costs the batch no time."""

    def __init__(self, source_id: int) -> None:
        self.source_id = source_id
        self.written = 0
        self.inserted = 0
        self.new_failures = 0
        self.failed_retries = 0
        # Rows in or out of each error group, per stream.
        self.group_delta: dict[tuple[int, str], int] = defaultdict(int)
        # The dates of the rows each group gained, and the groups that lost a row.
        self.gained: dict[int, tuple[datetime, datetime]] = {}
        self.lost: set[int] = set()
        self.rollups: dict[tuple[Any, ...], int] = defaultdict(int)
        self.latencies: dict[tuple[Any, ...], list[int]] = {}
        self.streams: dict[str, _StreamSeen] = {}
        self._prepared: tuple[RollupDelta | None, list[Any]] | None = None

    def add(self, w: Written) -> None:
        self._prepared = None
        self.written += 1
        row, old = w.row, w.old
        group = row.error_group_id
        if group is not None:
            self.group_delta[(group, row.stream_id)] += 1
            span = self.gained.get(group)
            self.gained[group] = (min(span[0], row.date), max(span[1], row.date)) if span else (row.date, row.date)
        failing = row.status != DeliveryStatus.DELIVERED
        # Each written row counts once more under its dimensions, a replaced row once less under its own.
        self._count(row, 1)
        if old is None:
            self.inserted += 1
            self.new_failures += failing
        else:
            if old.error_group_id is not None:
                self.group_delta[(old.error_group_id, old.stream_id)] -= 1
                self.lost.add(old.error_group_id)
            self.new_failures += failing and old.status == DeliveryStatus.DELIVERED
            self.failed_retries += failing and old.status != DeliveryStatus.DELIVERED and row.retries > old.retries
            self._count(old, -1)
        seen = self.streams.get(row.stream_id)
        if seen is None:
            self.streams[row.stream_id] = _StreamSeen(row.tag, {row.webhook_url}, {row.chain_id}, row.date, row.date)
        else:
            seen.add(row)

    def _count(self, row: Counted, sign: int) -> None:
        # A test webhook is no chain event: it stays out of the counts every rate and chart reads.
        if not row.is_test:
            key = (row.source_id, HourlyRollup.hour_of(row.date), *row[2:10])
            self.rollups[key] += sign
            if row.latency_slot is not None:
                histograms = self.latencies.get(key)
                if histograms is None:
                    histograms = self.latencies[key] = [0] * (2 * BUCKETS)
                histograms[row.latency_slot] += sign

    def prepare(self) -> tuple[RollupDelta | None, list[Any]]:
        """The statements' parameters, computed once (while the server is busy with the rows, when called then)."""
        if self._prepared is None:
            self._prepared = (
                rollup_delta(self.rollups, self.latencies), _stream_params(self.source_id, self.streams)
            )
        return self._prepared

    def apply(self, cursor: Any, result: StoreResult) -> None:
        rollups, streams = self.prepare()
        result.inserted += self.inserted
        result.updated += self.written - self.inserted
        result.new_failures += self.new_failures
        result.failed_retries += self.failed_retries
        apply_group_changes(
            cursor, self.group_delta, {g: span for g, span in self.gained.items() if g not in self.lost}
        )
        if rollups is not None:
            add_to_rollups(cursor, rollups)
        cursor.execute(_UPDATE_STREAMS, streams)


@dataclass
class _StreamSeen:
    """A stream as a batch's written rows show it: its latest tag, its URLs and chains, its first and last date."""

    tag: str
    urls: set[str]
    chains: set[str]
    first: datetime
    last: datetime

    def add(self, row: Counted) -> None:
        self.urls.add(row.webhook_url)
        self.chains.add(row.chain_id)
        self.first = min(self.first, row.date)
        if row.date >= self.last:
            self.last = row.date
            self.tag = row.tag


def _counted(p: ParsedRecord, source_id: int, group_id: int | None) -> Counted:
    return Counted(
        source_id, p.date, p.stream_id, p.tag, p.webhook_url, p.chain_id, p.status, group_id, p.retries,
        event_names(p.search_keys), p.is_test, latency_slot(p.latency_ms, p.confirmed),
    )


def _group_of(p: ParsedRecord, group_ids: dict[str, int]) -> int | None:
    return group_ids.get(p.error_message) if p.error_message else None


def _stored_digests(cursor: Any, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The digest stored under each of these ids that is stored at all (whatever its date)."""
    # The ids reach the scans as one value computed before them (an InitPlan): given as a literal array, the
    # planner estimated each of its ~1,000 ids against each week partition, which took as long as the lookup.
    cursor.execute(
        "SELECT id, record_hash FROM deliveries_delivery WHERE id = ANY(ARRAY(SELECT unnest(%s::uuid[])))",
        [array_literal(ids)],
    )
    return dict(cursor.fetchall())


def _insert_new(
    cursor: Any, source_id: int, new: Sequence[ParsedRecord], group_ids: dict[str, int], now: datetime,
    changes: BatchChanges, *, last: bool,
) -> None:
    """COPY records stored under no id yet into the deliveries table and record the failing ones' first
    attempt state. Their changes are gathered (and, when no other rows follow, prepared) while the server
    stores the rows."""

    def meanwhile() -> list[Any]:
        for p in new:
            changes.add(Written(p.id, _counted(p, source_id, _group_of(p, group_ids)), None))
        if last:
            changes.prepare()
        failing = [p for p in new if p.status != DeliveryStatus.DELIVERED]
        return [now, *(array_literal(values) for values in (
            [p.id for p in failing], [p.date for p in failing], [p.retries for p in failing],
            [p.status for p in failing], [p.error_message for p in failing],
        ))] if failing else []

    first_states = copy_rows(cursor, "deliveries_delivery", source_id, new, group_ids, now, meanwhile=meanwhile)
    if first_states:
        cursor.execute(
            """
            INSERT INTO deliveries_deliverychange (delivery_id, date, seen_at, retries, status, error_message)
            SELECT t.id, t.date, %s, t.retries, t.status, t.error_message
              FROM unnest(%s::uuid[], %s::timestamptz[], %s::int[], %s::varchar[], %s::text[])
                   AS t(id, date, retries, status, error_message)
            """,
            first_states,
        )


def copy_rows(
    cursor: Any, table: str, source_id: int, parsed: Sequence[ParsedRecord], group_ids: dict[str, int], now: datetime,
    *, meanwhile: Callable[[], T] | None = None,
) -> T | None:
    """Send parsed records' rows into `table` (the deliveries table's columns) with one binary COPY; return what
    `meanwhile` returns, called once every row is sent and before the server's answer is waited for. The server
    stores the rows as they arrive and is still at it then (~50 ms for 1,000 rows of ~3.6 KB): Python work done
    in that time is free."""
    raw = cursor.cursor  # the psycopg cursor under Django's wrapper, inside the same transaction
    columns = ", ".join(COLUMN_NAMES)
    # The raw cursor's errors are raised as Django's, like every other statement's: a server gone mid-COPY is
    # the DatabaseError the poll's handlers expect, and the connection is known broken.
    with cursor.db.wrap_database_errors, raw.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(COPY_TYPES)
        for p in parsed:
            copy.write_row(
                (
                    p.id, source_id, p.date, p.stream_id, p.tag, p.webhook_url, p.chain_id, p.confirmed,
                    p.block_number, p.records, p.retries, p.error_message, p.status,
                    _group_of(p, group_ids),
                    p.search_keys, Jsonb(p.tiny_payload, dumps=raw_json),
                    Jsonb(p.payload, dumps=raw_json) if p.payload is not None else None,
                    p.record_hash, now, now, p.is_test, p.block_time, p.latency_ms,
                )
            )
        return meanwhile() if meanwhile is not None else None


def _copy_to_stage(
    cursor: Any, source_id: int, parsed: Sequence[ParsedRecord], group_ids: dict[str, int], now: datetime
) -> None:
    cursor.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {STAGE_TABLE} "
        "(LIKE deliveries_delivery INCLUDING DEFAULTS INCLUDING COMPRESSION) ON COMMIT DELETE ROWS"
    )
    # Normally empty already (ON COMMIT DELETE ROWS); a savepoint rolled back mid-batch can leave rows.
    cursor.execute(f"TRUNCATE {STAGE_TABLE}")
    copy_rows(cursor, STAGE_TABLE, source_id, parsed, group_ids, now)


def _drop_moved(cursor: Any, written: list[Written]) -> None:
    """Delete the old row of a record whose date changed upstream. The key is (id, date), so the upsert
    inserted the record anew; `written` already counts it as an update from its old state (group counts, both
    hours' rollups), and only the old row is left to go."""
    moved = [(w.id, w.old.date) for w in written if w.old is not None and w.old.date != w.row.date]
    if moved:
        cursor.execute(
            """
            DELETE FROM deliveries_delivery d USING unnest(%s::uuid[], %s::timestamptz[]) AS m(id, date)
             WHERE d.id = m.id AND d.date = m.date
            """,
            [[m[0] for m in moved], [m[1] for m in moved]],
        )


def _upsert_from_stage(cursor: Any, staged: dict[uuid.UUID, ParsedRecord]) -> list[Written]:
    """Write the staged rows (stored before under their id, with another digest): rewrite them in place, or
    insert them anew where their date changed (`_drop_moved` then deletes the old row); return them with their
    previous state."""
    columns = ", ".join(COLUMN_NAMES)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in UPDATED_COLUMNS)
    # All parts of one statement see the same snapshot: `old` is the state before the upsert.
    # Rows are written in id order so that two writers never lock rows in opposite orders.
    cursor.execute(
        f"""
        WITH old AS (
            SELECT d.id, d.source_id, d.date, d.stream_id, d.tag, d.webhook_url, d.chain_id, d.status,
                   d.error_group_id, d.retries, {EVENT_KEYS} AS events, d.is_test, d.error_message,
                   d.latency_ms, d.confirmed
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
        SELECT w.id, w.source_id, w.error_group_id, o.id IS NOT NULL, o.source_id, o.date, o.stream_id, o.tag,
               o.webhook_url, o.chain_id, o.status, o.error_group_id, o.retries, o.events, o.is_test,
               o.latency_ms, o.confirmed
          FROM written w LEFT JOIN old o ON o.id = w.id
        """,  # noqa: S608 - table and column names are constants
    )
    return [
        Written(
            id_, _counted(staged[id_], source_id, group_id),
            Counted._make((*old[:9], tuple(e[6:] for e in old[9]), old[10], latency_slot(old[11], old[12])))
            if existed else None,
        )
        for id_, source_id, group_id, existed, *old in cursor.fetchall()
    ]


def _stream_params(source_id: int, streams: dict[str, _StreamSeen]) -> list[Any]:
    ids = sorted(streams)
    return [source_id, *(array_literal(values) for values in (
        ids,
        [streams[s].tag for s in ids],
        ["\x1f".join(sorted(u for u in streams[s].urls if u)) for s in ids],
        ["\x1f".join(sorted(c for c in streams[s].chains if c)) for s in ids],
        [streams[s].first for s in ids],
        [streams[s].last for s in ids],
    ))]


_UPDATE_STREAMS = """
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
"""
