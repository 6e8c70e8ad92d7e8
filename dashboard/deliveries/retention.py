"""Retention: deliveries older than HISTORY_RETENTION_DAYS go, rollups stay until ROLLUP_RETENTION_DAYS.

The deliveries table is partitioned by week (`partitions.py`): a week partition goes whole once its last day
has expired (detached, then dropped: nothing to delete row by row, nothing to vacuum), so a delivery is kept
up to a week past HISTORY_RETENTION_DAYS. In the default partition and in a table attached whole by the
partitioning migration (`deliveries_delivery_legacy`), expired rows are deleted in bounded batches, each its
own short transaction under the write lock. Error-group counts stay exact either way. Rollups of deleted
hours are deliberately not recomputed: they keep counting what was delivered after the rows are gone.

Each run also makes the partitions of the coming weeks, so ingest seldom has to.

With an archive (ARCHIVE_URL, `archive.py`), nothing is deleted that is not in it: a partition is dropped only
once each of its days holding rows is exported and verified (and none is held by a restore), and in the default
and legacy partitions rows go by whole days, up to the first day that is not archived.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as clock

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from dashboard.deliveries import archive, partitions
from dashboard.deliveries.grouping import apply_group_changes
from dashboard.deliveries.models import PeriodRollup
from dashboard.deliveries.rollup_upkeep import PERIOD_TABLES, ROLLUP_TABLES, STREAM_PERIOD_TABLE
from dashboard.deliveries.write_lock import take_write_lock

log = logging.getLogger(__name__)



@dataclass
class RetentionResult:
    deliveries_deleted: int = 0
    rollups_deleted: int = 0
    batches: int = 0
    partitions_dropped: list[str] = field(default_factory=list)
    partitions_made: list[str] = field(default_factory=list)
    # Expired partitions left for the next run (their detach waited too long for a lock).
    partitions_deferred: list[str] = field(default_factory=list)
    # Distinct error messages no stored delivery carries any more.
    messages_deleted: int = 0
    # Expired partitions kept because their archive is not verified (or a day of them is held), with why.
    partitions_unarchived: dict[str, str] = field(default_factory=dict)
    # Days exported to the archive by this run.
    days_archived: int = 0


def enforce_retention(
    *, now: datetime | None = None, batch_size: int | None = None, max_batches: int = 10_000
) -> RetentionResult:
    now = now or timezone.now()
    batch_size = batch_size or settings.RETENTION_BATCH_SIZE
    delivery_cutoff = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    rollup_cutoff = now - timedelta(days=settings.ROLLUP_RETENTION_DAYS)
    result = RetentionResult()
    store = archive.open_store() if archive.archive_enabled() else None
    # Exports stop starting new days after two thirds of the task's time: the rest of the run still happens, and
    # the next run goes on with the archive where this one stopped.
    deadline = time.monotonic() + settings.CELERY_TASK_SOFT_TIME_LIMIT * 2 / 3
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        result.partitions_made = partitions.ensure_partitions_between(cursor, now, now + partitions.AHEAD)
        current = partitions.partitions(cursor)
        leftovers = partitions.detached_leftovers(cursor)
    for name in leftovers:
        _drop_table(name)
    for partition in current:
        if partition.is_default:
            cutoff = _archived_cutoff(store, partition.name, delivery_cutoff, now, deadline, result)
            _delete_expired_rows(partition.name, cutoff, batch_size, max_batches, result)
        elif partition.end is not None and partition.end <= delivery_cutoff:
            expected = _archived_rows(store, partition, now, deadline, result)
            if store is None or expected is not None:
                _drop_partition(partition.name, result, expected)
        elif not partition.is_week and (partition.start is None or partition.start < delivery_cutoff):
            cutoff = _archived_cutoff(store, partition.name, delivery_cutoff, now, deadline, result)
            _delete_expired_rows(partition.name, cutoff, batch_size, max_batches, result)
    _delete_what_outlived_the_deliveries(delivery_cutoff, batch_size, max_batches, result)
    # A period rollup goes when its whole period is before the cutoff.
    cutoffs = [(table, rollup_cutoff) for table in ROLLUP_TABLES]
    period_tables = [table for table, _hourly, _extra in PERIOD_TABLES] + [STREAM_PERIOD_TABLE]
    cutoffs += [(table, PeriodRollup.period_of(rollup_cutoff)) for table in period_tables]
    for table, cutoff in cutoffs:
        while result.batches < max_batches:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE hour < %s LIMIT %s)",  # noqa: S608
                    [cutoff, batch_size],
                )
                deleted = cursor.rowcount
            result.batches += 1
            result.rollups_deleted += deleted
            if deleted < batch_size:
                break
    if result.deliveries_deleted or result.rollups_deleted:
        log.info(
            "retention: %d deliveries before %s (partitions dropped: %s) and %d rollup rows before %s deleted",
            result.deliveries_deleted, delivery_cutoff.date(), ", ".join(result.partitions_dropped) or "none",
            result.rollups_deleted, rollup_cutoff.date(),
        )
    return result


def _archived_rows(
    store: archive.Store | None, partition: partitions.Partition, now: datetime, deadline: float,
    result: RetentionResult,
) -> int | None:
    """With an archive: the partition's rows, every one of them exported and verified; None when some are not
    (the partition stays, and why is logged)."""
    if store is None:
        return None
    start = partition.start or _oldest_day(partition.name)
    if start is None:
        return 0
    assert partition.end is not None
    check = archive.ready_to_drop(store, start, partition.end, now=now, deadline=deadline)
    result.days_archived += sum(1 for done in check.exported if done.outcome == "exported")
    if not check.ok:
        log.error("retention: partition %s kept, its archive is not verified: %s", partition.name, check.problem)
        result.partitions_unarchived[partition.name] = check.problem
        return None
    return check.rows


def _archived_cutoff(
    store: archive.Store | None, table: str, cutoff: datetime, now: datetime, deadline: float,
    result: RetentionResult,
) -> datetime:
    """The cutoff of a row-by-row delete: as given without an archive; with one, the start of the first expired
    day that is not archived and verified (whole days only)."""
    if store is None:
        return cutoff
    last = datetime.combine(cutoff.astimezone(UTC).date(), clock.min, tzinfo=UTC)
    day = _oldest_day(table, before=cutoff)
    while day is not None and day < last:
        check = archive.ready_to_drop(store, day, day + timedelta(days=1), now=now, deadline=deadline)
        result.days_archived += sum(1 for done in check.exported if done.outcome == "exported")
        if not check.ok:
            log.error("retention: %s kept from %s on, its archive is not verified: %s", table, day.date(), check.problem)
            result.partitions_unarchived[table] = check.problem
            return day
        day += timedelta(days=1)
    return last


def _oldest_day(table: str, *, before: datetime | None = None) -> datetime | None:
    with connection.cursor() as cursor:
        where = "" if before is None else "WHERE date < %s"
        cursor.execute(f"SELECT min(date) FROM {table} {where}", [] if before is None else [before])  # noqa: S608
        (oldest,) = cursor.fetchone()
    if oldest is None:
        return None
    return datetime.combine(oldest.astimezone(UTC).date(), clock.min, tzinfo=UTC)


def _drop_partition(name: str, result: RetentionResult, archived_rows: int | None = None) -> None:
    """Detach an expired partition, taking its rows out of the error-group counts in the same transaction,
    then drop it. A detach that waits over partitions.LOCK_TIMEOUT_MS is left for the next run, and so is a
    partition holding other rows than the archive verified (`archived_rows`; a row written since)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            take_write_lock(cursor)
            cursor.execute(f"SELECT count(*) FROM {name}")  # noqa: S608 - a partition's name from the catalog
            (rows,) = cursor.fetchone()
            if archived_rows is not None and rows != archived_rows:
                log.warning("retention: partition %s kept: %d rows, %d archived", name, rows, archived_rows)
                result.partitions_deferred.append(name)
                return
            cursor.execute(
                f"SELECT error_group_id, stream_id, count(*) FROM {name} WHERE error_group_id IS NOT NULL GROUP BY 1, 2"  # noqa: S608
            )
            delta = {(group_id, stream_id): -n for group_id, stream_id, n in cursor.fetchall()}
            cursor.execute(f"SET LOCAL lock_timeout = {partitions.LOCK_TIMEOUT_MS:d}")
            cursor.execute(f"ALTER TABLE {partitions.PARENT} DETACH PARTITION {name}")
            apply_group_changes(cursor, delta)
    except OperationalError as error:
        log.warning("retention: partition %s not detached this time: %s", name, error)
        result.partitions_deferred.append(name)
        return
    # Detached: no query of the deliveries reads it any more, so dropping it waits for nobody.
    _drop_table(name)
    result.partitions_dropped.append(name)
    result.deliveries_deleted += rows


def _drop_table(name: str) -> None:
    with connection.cursor() as cursor:
        # Inside a caller's transaction that wrote deliveries, their deferred foreign-key checks must run
        # before a table they touched can go; on its own (autocommit) this changes nothing.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP TABLE IF EXISTS {name}")


def _delete_expired_rows(
    table: str, cutoff: datetime, batch_size: int, max_batches: int, result: RetentionResult
) -> None:
    """Delete the rows of one partition dated before `cutoff`, in batches."""
    # Each batch starts its walk of the date index at the newest date the last one deleted: the entries of the
    # rows already deleted stay in the index until a vacuum, and walking past them again made every batch
    # slower than the one before (a whole day at 1 M a day: from 650 to ~50,000 index pages a batch).
    # Rows of that same date the last batch left are still at or after it.
    floor: datetime | None = None
    while result.batches < max_batches:
        with transaction.atomic(), connection.cursor() as cursor:
            take_write_lock(cursor)
            since = "" if floor is None else "AND date >= %s"
            cursor.execute(
                f"""
                DELETE FROM {table}
                 WHERE (id, date) IN (SELECT id, date FROM {table} WHERE date < %s {since} ORDER BY date LIMIT %s)
                RETURNING error_group_id, stream_id, date
                """,  # noqa: S608 - a partition's name from the catalog; values are parameters
                [cutoff, *([] if floor is None else [floor]), batch_size],
            )
            rows = cursor.fetchall()
            delta: dict[tuple[int, str], int] = defaultdict(int)
            for group_id, stream_id, _ in rows:
                if group_id is not None:
                    delta[(group_id, stream_id)] -= 1
            if rows:
                floor = max(date for _, _, date in rows)
            apply_group_changes(cursor, delta)
        result.batches += 1
        result.deliveries_deleted += len(rows)
        if len(rows) < batch_size:
            break


def _delete_what_outlived_the_deliveries(cutoff: datetime, batch_size: int, max_batches: int, result: RetentionResult) -> None:
    """The changes polls saw of deliveries that are gone, and the error messages no stored delivery can carry:
    dated (last seen) before the cutoff and before the oldest delivery still stored (a week partition keeps some
    deliveries past the cutoff)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(date) FROM {partitions.PARENT}")  # noqa: S608 - a constant
        (oldest,) = cursor.fetchone()
    before = cutoff if oldest is None else min(cutoff, oldest)
    with transaction.atomic(), connection.cursor() as cursor:
        # Under the write lock: a batch being written may be about to record a message as seen again.
        take_write_lock(cursor)
        cursor.execute("DELETE FROM deliveries_errormessage WHERE last_seen < %s", [before])
        result.messages_deleted = cursor.rowcount
    while result.batches < max_batches:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                """
                DELETE FROM deliveries_deliverychange
                 WHERE id IN (SELECT id FROM deliveries_deliverychange WHERE date < %s ORDER BY date LIMIT %s)
                """,
                [before, batch_size],
            )
            deleted = cursor.rowcount
        result.batches += 1
        if deleted < batch_size:
            break
