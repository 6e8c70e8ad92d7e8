"""Derived data recomputed from the stored deliveries: hourly rollups, error-group counts, the distinct error
messages and stream rows.

Ingest keeps them exact batch by batch; this is for rows that came another way (the generator's bulk
`INSERT … SELECT`, a restored dump, a manual fix). Rollups are recomputed by `rollup_upkeep.py`, one day
of rows per transaction under the write lock, so a poll can run meanwhile; rollups of hours that hold
no stored delivery (kept after retention) are left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from dashboard.deliveries.grouping import rebuild_error_messages, recount_error_groups
from dashboard.deliveries.rollup_upkeep import recompute_rollups_between
from dashboard.deliveries.write_lock import take_write_lock


@dataclass(frozen=True)
class Rebuilt:
    hours: int
    rollups: int
    streams: int


def rebuild_derived(
    source_id: int | None = None,
    *,
    on_day: Callable[[datetime], None] | None = None,
    between: tuple[datetime, datetime] | None = None,
) -> Rebuilt:
    """Recompute the rollups, stream rows and error messages of one source (all when None) and every error group's
    count; the rollups only of the days in `between` when given (a restored day: `archive.restore_day`)."""
    only = "" if source_id is None else "WHERE source_id = %(source)s"
    params: dict[str, int | datetime | None] = {"source": source_id}
    days_only = only
    if between is not None:
        days_only = ("WHERE " if not only else only + " AND ") + "date >= %(start)s AND date < %(end)s"
        params.update(start=between[0], end=between[1])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT date_trunc('day', date) FROM deliveries_delivery {days_only} ORDER BY 1",  # noqa: S608
            params,
        )
        days = [day for (day,) in cursor.fetchall()]
    hours = 0
    for day in days:
        with transaction.atomic(), connection.cursor() as cursor:
            take_write_lock(cursor)
            hours += recompute_rollups_between(cursor, day, day + timedelta(days=1), source_id)
        if on_day is not None:
            on_day(day)
    streams = _rebuild_streams(source_id)
    recount_error_groups()
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        rebuild_error_messages(cursor, source_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM deliveries_hourlyrollup {only}",  # noqa: S608
            params,
        )
        (rollups,) = cursor.fetchone()
    return Rebuilt(hours=hours, rollups=rollups, streams=streams)


def _rebuild_streams(source_id: int | None) -> int:
    """Each stream's tag (of its newest delivery), webhook URLs, chains and first and last delivery, exactly
    as the stored rows say; what the provider's stream sync wrote stays."""
    only = "" if source_id is None else "WHERE source_id = %(source)s"
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        cursor.execute(
            f"""
            INSERT INTO deliveries_stream
                   (source_id, stream_id, tag, webhook_urls, chain_ids, first_delivery_at, last_delivery_at)
            SELECT g.source_id, g.stream_id,
                   (SELECT d.tag FROM deliveries_delivery d WHERE d.source_id = g.source_id
                       AND d.stream_id = g.stream_id ORDER BY d.date DESC, d.id DESC LIMIT 1),
                   g.urls, g.chains, g.first, g.last
              FROM (
                SELECT source_id, stream_id,
                       COALESCE(array_agg(DISTINCT webhook_url ORDER BY webhook_url)
                                FILTER (WHERE webhook_url <> ''), '{{}}') AS urls,
                       COALESCE(array_agg(DISTINCT chain_id ORDER BY chain_id)
                                FILTER (WHERE chain_id <> ''), '{{}}') AS chains,
                       min(date) AS first, max(date) AS last
                  FROM deliveries_delivery {only}
                 GROUP BY source_id, stream_id
              ) g
            ON CONFLICT (source_id, stream_id) DO UPDATE SET
                tag = EXCLUDED.tag, webhook_urls = EXCLUDED.webhook_urls, chain_ids = EXCLUDED.chain_ids,
                first_delivery_at = EXCLUDED.first_delivery_at, last_delivery_at = EXCLUDED.last_delivery_at
            """,  # noqa: S608 - fixed SQL; values are parameters
            {"source": source_id},
        )
        return int(cursor.rowcount)
