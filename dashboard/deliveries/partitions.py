"""The deliveries table is partitioned by time: one partition a week of delivery dates, so retention drops a
whole expired week (a catalog change, nothing to vacuum) instead of deleting millions of rows.

- `deliveries_delivery` is `PARTITION BY RANGE (date)`, its primary key `(id, date)`: a delivery's date (its
  first attempt) does not change upstream, and ingest handles the record whose date did (`ingest.py`).
- `deliveries_delivery_pYYYYMMDD` holds the week starting that Monday (UTC). Ingest makes the partitions its
  batch needs; the retention task makes the coming weeks' ahead of time and drops expired ones.
- `deliveries_delivery_default` takes rows no partition covers (written outside the write path); a new
  partition takes over the default's rows of its week when it is made.
- `deliveries_delivery_legacy` is a table that existed before partitioning, attached whole by the migration
  (`0011_partition_deliveries`) for every date before its first week; retention deletes its expired rows in
  batches until the whole of it has expired, then drops it like any partition.

Every function here runs inside the caller's transaction, under the write lock (`write_lock.py`).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import OperationalError, transaction

from dashboard.deliveries.models import PERIOD_ORIGIN

log = logging.getLogger(__name__)

PARENT = "deliveries_delivery"
DEFAULT = "deliveries_delivery_default"
LEGACY = "deliveries_delivery_legacy"
PREFIX = "deliveries_delivery_p"
WIDTH = timedelta(days=7)
# Partitions are aligned to this Monday, midnight UTC.
ORIGIN = PERIOD_ORIGIN
# How far ahead of now the retention task keeps partitions made, so ingest seldom makes one itself.
AHEAD = timedelta(days=14)
# How long attaching or detaching a partition waits for the queries reading the table before it gives up until
# a later attempt: pages queue behind a waiting lock, so it must not wait long.
LOCK_TIMEOUT_MS = 2000

_BOUND = re.compile(r"FOR VALUES FROM \((?:'([^']+)'|MINVALUE)\) TO \((?:'([^']+)'|MAXVALUE)\)")


@dataclass(frozen=True)
class Partition:
    name: str
    # None for MINVALUE / MAXVALUE; both None for the default partition.
    start: datetime | None
    end: datetime | None
    is_default: bool = False

    @property
    def is_week(self) -> bool:
        """A partition of one aligned week, made by `make_partition`; dropped whole once expired."""
        return self.start is not None and self.end is not None and self.end - self.start <= WIDTH

    def covers(self, moment: datetime) -> bool:
        if self.is_default:
            return False
        return (self.start is None or self.start <= moment) and (self.end is None or moment < self.end)


def week_of(moment: datetime) -> datetime:
    """The start of the partition week holding `moment`."""
    return ORIGIN + (moment - ORIGIN) // WIDTH * WIDTH


def partition_name(start: datetime) -> str:
    return f"{PREFIX}{start:%Y%m%d}"


def _parse_moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def partitions(cursor: Any) -> list[Partition]:
    """The attached partitions, oldest first (the default last)."""
    cursor.execute(
        """
        SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = %s::regclass
        """,
        [PARENT],
    )
    found = []
    for name, bound in cursor.fetchall():
        if bound == "DEFAULT":
            found.append(Partition(name, None, None, is_default=True))
            continue
        match = _BOUND.fullmatch(bound)
        if match is None:
            raise ValueError(f"unexpected partition bound of {name}: {bound}")
        found.append(Partition(name, _parse_moment(match.group(1)), _parse_moment(match.group(2))))
    return sorted(found, key=lambda p: (p.is_default, p.start is not None, p.start or ORIGIN))


def ensure_partitions(cursor: Any, moments: Iterable[datetime]) -> list[str]:
    """Make the week partitions that rows dated `moments` need and no partition covers; their names.

    Attaching a partition locks the default partition, which every query reading the whole table also holds
    (a long export, say), and pages would queue behind the waiting attach: a partition whose lock is not had
    within LOCK_TIMEOUT_MS is left for later, its week's rows go to the default partition meanwhile, and the
    next attempt moves them into it."""
    by_week: dict[datetime, set[datetime]] = defaultdict(set)
    for moment in moments:
        by_week[week_of(moment)].add(moment)
    existing = partitions(cursor)
    wanted = [
        moment
        for week, week_moments in sorted(by_week.items())
        if not any(p.covers(week) and p.covers(week + WIDTH - timedelta.resolution) for p in existing)
        for moment in sorted(week_moments)
    ]
    made: list[str] = []
    # A week whose attach waited too long is not tried again for its other rows: one wait per week and call.
    given_up: set[datetime] = set()
    for moment in wanted:
        if week_of(moment) in given_up or any(p.covers(moment) for p in existing):
            continue
        try:
            with transaction.atomic(using=cursor.db.alias):
                cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS:d}")
                made.append(make_partition(cursor, moment, existing))
                cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
        except OperationalError as error:
            given_up.add(week_of(moment))
            log.warning("partition for %s not made this time: %s", f"{moment:%Y-%m-%d}", error)
    return made


def ensure_partitions_between(cursor: Any, start: datetime, end: datetime) -> list[str]:
    """Make every missing week partition from the week of `start` to the week of `end`, both included."""
    days = []
    day = week_of(start)
    while day <= end:
        days.append(day)
        day += timedelta(days=1)
    return ensure_partitions(cursor, days)


def make_partition(cursor: Any, moment: datetime, existing: list[Partition]) -> str:
    """Make and attach the partition of the week holding `moment`, narrowed to the gap around `moment` where a
    partition of another shape (the old table, one made by hand) covers part of the week, with the default
    partition's rows of its dates moved into it."""
    start, end = week_of(moment), week_of(moment) + WIDTH
    for p in existing:
        if p.is_default:
            continue
        if p.end is not None and start < p.end <= moment:
            start = p.end
        if p.start is not None and moment < p.start < end:
            end = p.start
    name = partition_name(start)
    lower, upper = _literal(start), _literal(end)
    cursor.execute(
        f"CREATE TABLE {name} (LIKE {PARENT} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE"
        " INCLUDING COMPRESSION)"
    )
    if any(p.is_default for p in existing):
        # Attaching checks that the default holds no row of these dates: move them first.
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE date >= {lower} AND date < {upper} RETURNING *)"  # noqa: S608
            f" INSERT INTO {name} SELECT * FROM moved"
        )
    cursor.execute(f"ALTER TABLE {PARENT} ATTACH PARTITION {name} FOR VALUES FROM ({lower}) TO ({upper})")
    existing.append(Partition(name, start, end))
    return name


def detached_leftovers(cursor: Any) -> list[str]:
    """Week partitions detached but not dropped (their dropper stopped between the two steps)."""
    cursor.execute(
        """
        SELECT c.relname FROM pg_class c
         WHERE c.relname LIKE %s AND c.relkind = 'r' AND NOT c.relispartition
           AND c.relnamespace = current_schema()::regnamespace
        """,
        [PREFIX.replace("_", r"\_") + "%"],
    )
    return [name for (name,) in cursor.fetchall()]


def _literal(moment: datetime) -> str:
    """A timestamptz literal for DDL, which takes no parameters; `moment` is computed, never user input."""
    return f"'{moment.isoformat()}'::timestamptz"
