"""Filling the block time and latency of deliveries stored before they were kept (migration 0020), from their
payloads, and recomputing the rollups of the filled periods so their latency histograms count them.

One six-hour period (`ROLLUP_PERIOD`, aligned as the period rollups are) per transaction, newest first, under the
write lock, so a poll waits at most one period's update; a stopped run resumes with the `before` it printed. The
SQL reads the timestamp as `records._block_time` does (Unix seconds as a string or number, milliseconds above
1e11, nothing before 2000) and the latency as `latency.latency_ms` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from dashboard.deliveries.latency import MAX_LATENCY_MS
from dashboard.deliveries.models import ROLLUP_PERIOD, PeriodRollup
from dashboard.deliveries.rollup_upkeep import recompute_rollups_between
from dashboard.deliveries.write_lock import take_write_lock

_SECONDS = r"""CASE WHEN d.payload->'block'->>'timestamp' ~ '^\s*[0-9]{1,16}(\.[0-9]+)?\s*$'
                    THEN (d.payload->'block'->>'timestamp')::numeric END"""
_FILL = f"""
WITH read AS (
    SELECT d.id, d.date, CASE WHEN s.seconds > 1e11 THEN s.seconds / 1000 ELSE s.seconds END AS seconds
      FROM deliveries_delivery d CROSS JOIN LATERAL (SELECT {_SECONDS} AS seconds) s
     WHERE d.date >= %(start)s AND d.date < %(end)s AND d.block_time IS NULL AND d.payload IS NOT NULL
), timed AS (
    SELECT id, date, to_timestamp(seconds) AS block_time FROM read WHERE seconds >= 946684800
)
UPDATE deliveries_delivery d
   SET block_time = t.block_time,
       latency_ms = CASE WHEN abs(floor(extract(epoch FROM t.date - t.block_time) * 1000)) <= {MAX_LATENCY_MS}
                         THEN floor(extract(epoch FROM t.date - t.block_time) * 1000)::int END
  FROM timed t
 WHERE d.id = t.id AND d.date = t.date
"""  # noqa: S608 - a constant bound


@dataclass(frozen=True)
class Filled:
    start: datetime
    filled: int


def fill_latencies(*, before: datetime | None = None) -> Iterator[Filled]:
    """Walk the stored deliveries' periods from the newest (or the one before `before`) to the oldest; fill each
    one's missing block times and latencies and recompute its rollups when any was filled."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(date), max(date) FROM deliveries_delivery")
        oldest, newest = cursor.fetchone()
    if oldest is None:
        return
    end = PeriodRollup.period_of(newest) + ROLLUP_PERIOD
    if before is not None:
        end = min(end, PeriodRollup.period_of(before))
    while end > oldest:
        start = end - ROLLUP_PERIOD
        with transaction.atomic(), connection.cursor() as cursor:
            take_write_lock(cursor)
            cursor.execute(_FILL, {"start": start, "end": end})
            filled = cursor.rowcount
            if filled:
                recompute_rollups_between(cursor, start, end)
        yield Filled(start, filled)
        end = start
