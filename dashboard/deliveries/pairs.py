"""Confirmed and unconfirmed deliveries of one block: the provider delivers every block twice per stream,
first unconfirmed, then confirmed once the chain has settled it. A receiver that acts only on confirmed
blocks silently misses a block whose confirmed delivery never came, or failed while the unconfirmed one
went through. This module finds those gaps with bounded queries on the (stream_id, block_number,
chain_id) index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, router

from dashboard import visibility
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from dashboard.upstream.chains import CHAINS

# How many of the newest unconfirmed (or failing confirmed) deliveries of the window one look reads, and
# how many gaps it returns: a page stays one bounded read however large the window.
SCAN_ROWS = 20_000
GAPS_MAX = 200
# A chain the table does not know gets this long to confirm a block.
DEFAULT_FINALITY = timedelta(minutes=15)


@dataclass(frozen=True)
class Gap:
    kind: str  # "missing" (no confirmed delivery after finality) | "failed" (confirmed failing, unconfirmed delivered)
    unconfirmed: Delivery
    confirmed: Delivery | None

    @property
    def delivery(self) -> Delivery:
        return self.confirmed or self.unconfirmed


_MISSING = """
WITH finality(chain_id, seconds) AS (SELECT * FROM unnest(%(chains)s::text[], %(seconds)s::float8[])),
recent AS (
    SELECT d.id, d.source_id, d.stream_id, d.chain_id, d.block_number, d.date
      FROM {table} d
     WHERE d.date >= %(since)s AND d.date < %(until)s AND d.confirmed = false AND d.block_number IS NOT NULL
           {scope}
     ORDER BY d.date DESC
     LIMIT %(scan)s
)
SELECT r.id
  FROM recent r
  JOIN {sources} s ON s.id = r.source_id
  LEFT JOIN finality f ON f.chain_id = r.chain_id
  -- A lateral probe per row (LIMIT 1) keeps this on the block_number index; as NOT EXISTS the planner
  -- may hash the whole table instead.
  LEFT JOIN LATERAL (
       SELECT 1 AS found FROM {table} c
        WHERE c.stream_id = r.stream_id AND c.block_number = r.block_number AND c.chain_id = r.chain_id
          AND c.confirmed = true
        LIMIT 1
  ) c ON true
 -- only blocks whose confirmed delivery is due by the newest point the polls have read
 WHERE r.date + make_interval(secs => coalesce(f.seconds, %(default)s) + %(grace)s) < s.synced_through
   AND c.found IS NULL
 ORDER BY r.date DESC
 LIMIT %(limit)s
"""

_FAILED = """
WITH failing AS (
    SELECT d.id, d.stream_id, d.chain_id, d.block_number, d.date
      FROM {table} d
     WHERE d.date >= %(since)s AND d.date < %(until)s AND d.status <> 'delivered' AND d.confirmed = true
       AND d.block_number IS NOT NULL {scope}
     ORDER BY d.date DESC
     LIMIT %(scan)s
)
SELECT f.id, u.id
  FROM failing f
 CROSS JOIN LATERAL (
       SELECT u.id FROM {table} u
        WHERE u.stream_id = f.stream_id AND u.block_number = f.block_number AND u.chain_id = f.chain_id
          AND u.confirmed = false AND u.status = 'delivered'
        LIMIT 1
 ) u
 ORDER BY f.date DESC
 LIMIT %(limit)s
"""


# The columns a gap search can be narrowed by (an alert rule's scope), each read through its (column, date)
# index.
SCOPE_COLUMNS = ("stream_id", "tag", "webhook_url")


def confirmation_gaps(
    since: datetime, until: datetime, *, grace: timedelta, limit: int = GAPS_MAX, scan: int = SCAN_ROWS,
    scope: tuple[str, str] | None = None,
) -> list[Gap]:
    """The blocks of the window whose confirmed delivery never came (the unconfirmed one is older than
    the chain's finality plus `grace`, counted up to each source's `synced_through`), and those whose
    confirmed delivery is failing while the unconfirmed one was delivered; newest first, each kind
    bounded by `limit` and by reading at most `scan` rows. `scope` (column, value), a column of
    SCOPE_COLUMNS, keeps only one stream's, tag's or webhook URL's deliveries: the Confirmation gaps page
    reads every stream, an alert rule its own scope."""
    connection = connections[router.db_for_read(Delivery)]
    table = connection.ops.quote_name(Delivery._meta.db_table)
    sources = connection.ops.quote_name(Source._meta.db_table)
    params: dict[str, Any] = {
        "since": since, "until": until, "scan": scan, "limit": limit,
        "chains": [c.hex_id for c in CHAINS], "seconds": [float(c.finality_seconds) for c in CHAINS],
        "default": DEFAULT_FINALITY.total_seconds(), "grace": grace.total_seconds(),
    }
    where = ""
    if scope is not None:
        column, params["scope"] = scope
        if column not in SCOPE_COLUMNS:
            raise ValueError(f"cannot narrow confirmation gaps by {column!r}")
        where = f"AND d.{column} = %(scope)s"
    # Only the viewer's streams (every stream outside a request).
    seen, seen_params = visibility.sql_named("d.stream_id", "seen")
    params.update(seen_params)
    where = f"{where} AND {seen}"
    with connection.cursor() as cursor:
        cursor.execute(_MISSING.format(table=table, sources=sources, scope=where), params)  # noqa: S608 - names from models
        missing = [row[0] for row in cursor.fetchall()]
        cursor.execute(_FAILED.format(table=table, scope=where), params)  # noqa: S608 - names from models
        failed = cursor.fetchall()
    rows = Delivery.objects.for_list().in_bulk([*missing, *(c for c, _ in failed), *(u for _, u in failed)])
    gaps = [Gap("missing", rows[pk], None) for pk in missing if pk in rows]
    gaps += [Gap("failed", rows[u], rows[c]) for c, u in failed if c in rows and u in rows]
    gaps.sort(key=lambda g: g.unconfirmed.date, reverse=True)
    return gaps
