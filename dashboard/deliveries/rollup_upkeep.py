"""Keeping the rollups (hourly, six-hour period, both per event, and the period per stream) in step with the
stored deliveries: counts added as deltas (+1 a delivery stored, -1 a row it replaced) by the ingest write path,
and the rollups of touched (source, stream, hour) keys or of a date range recomputed from the stored rows
(`rekey.py`, `rebuild.py`). Retention reads the table names.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from dashboard.deliveries.latency import BUCKETS, bucket_sql
from dashboard.deliveries.models import PERIOD_ORIGIN, ROLLUP_PERIOD, PeriodRollup
from dashboard.deliveries.querysets import array_literal

ROLLUP_DIMENSIONS = "source_id, hour, stream_id, tag, webhook_url, chain_id, status, error_group_id, retries"
ROLLUP_TABLES = ("deliveries_hourlyrollup", "deliveries_eventrollup")
# The latency histograms (`latency.py`) of the hourly, period and stream period rollups, unconfirmed and confirmed.
LATENCY_COLUMNS = ("latency_unconfirmed", "latency_confirmed")
# A delivery's place in them: 1..BUCKETS its unconfirmed bucket, BUCKETS+1..2*BUCKETS its confirmed one, NULL
# without a latency.
LATENCY_SLOT = (
    f"CASE WHEN d.latency_ms IS NOT NULL THEN {bucket_sql('d.latency_ms')}"
    f" + CASE WHEN d.confirmed THEN {BUCKETS} ELSE 0 END END"
)


def histogram_sums(element: str) -> str:
    """Both histograms summed bucket by bucket over grouped rows: `element` gives the count of one delivery
    slot (`{slot}` the 1-based slot, `{column}` and `{i}` the histogram and its bucket)."""
    return ", ".join(
        "ARRAY[" + ", ".join(
            f"coalesce({element.format(slot=offset + i, column=column, i=i)}, 0)" for i in range(1, BUCKETS + 1)
        ) + f"]::int[] AS {column}"
        for offset, column in ((0, LATENCY_COLUMNS[0]), (BUCKETS, LATENCY_COLUMNS[1]))
    )


_SUMMED_HISTOGRAMS = histogram_sums("sum(r.{column}[{i}])")

# Both rollup tables from one read of the rows: `rows` yields the dimensions and each delivery's decoded
# event names (its `event:` search keys); the hourly rollup sums over them, the event rollup once per name.
_INSERT_ROLLUPS = f"""
WITH grouped AS MATERIALIZED (
    SELECT {ROLLUP_DIMENSIONS}, events, slot, count(*) AS n FROM ({{rows}}) AS src
     GROUP BY {ROLLUP_DIMENSIONS}, events, slot
), hourly AS (
    INSERT INTO deliveries_hourlyrollup ({ROLLUP_DIMENSIONS}, deliveries, {", ".join(LATENCY_COLUMNS)})
    SELECT {ROLLUP_DIMENSIONS}, sum(n), {histogram_sums("sum(n) FILTER (WHERE slot = {slot})")}
      FROM grouped GROUP BY {ROLLUP_DIMENSIONS}
)
INSERT INTO deliveries_eventrollup ({ROLLUP_DIMENSIONS}, event, deliveries)
SELECT {ROLLUP_DIMENSIONS}, substr(e.key, 7), sum(n)
  FROM grouped CROSS JOIN LATERAL unnest(grouped.events) AS e(key)
 GROUP BY {ROLLUP_DIMENSIONS}, e.key
"""  # noqa: S608 - column and table names are constants
# A delivery's event keys, in key order (the keys are stored sorted and distinct).
EVENT_KEYS = "ARRAY(SELECT k FROM unnest(d.search_keys) AS k WHERE k LIKE 'event:%%' ORDER BY k)"


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
               d.error_group_id, d.retries, d.events, d.slot
          FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
          -- LATERAL: one range scan of the (stream_id, date) index per touched hour. A plain join lets the
          -- planner hash the whole table once it is large (~1 s a batch at 2 M rows).
         CROSS JOIN LATERAL (
            SELECT d.tag, d.webhook_url, d.chain_id, d.status, d.error_group_id, d.retries, {EVENT_KEYS} AS events,
                   {LATENCY_SLOT} AS slot
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


_EVERY_DIMENSION = ("tag", "webhook_url", "chain_id", "status", "error_group_id", "retries")
ROLLUP_COLUMNS = ", ".join(_EVERY_DIMENSION)
# The stream period rollup's columns beside source, period and stream.
STREAM_PERIOD_TABLE = "deliveries_streamperiodrollup"
_STREAM_DIMENSIONS = ("tag", "webhook_url", "chain_id", "status")
STREAM_PERIOD_COLUMNS = ", ".join(_STREAM_DIMENSIONS)

_PERIOD = "date_bin(%(period)s, d.hour, %(origin)s)"
_WITH_EVENTS = "delta d JOIN delta_events e ON e.k = d.k"
_COUNTED = {"deliveries": "sum(d.n)"}


class _Target(NamedTuple):
    """A table ingest adds counts to: the slot start of a delta row, the delta rows it sums, its dimensions
    beside source, slot and stream, and its sums."""

    hour: str
    source: str
    dimensions: tuple[str, ...]
    sums: dict[str, str]
    # The table keeps the latency histograms: the delta rows' are added bucket by bucket.
    histograms: bool = False


# Adding counts (+1 a delivery now stored, -1 a row it replaced) to all five rollup tables in one statement.
# `delta` holds the counts per hourly dimensions (k numbers them), `delta_events` each delta row's event names;
# each table's counts are summed from them (a period's by its start), and each non-zero sum is added to the
# stored row of the same dimensions, or inserted when there is none (a positive one: a replaced row is always
# counted in a stored row). Rollup rows are distinct in their dimensions (every writer groups by all of them),
# so one stored row at most matches.
_ADD_TARGETS = {
    "deliveries_hourlyrollup": _Target("d.hour", "delta d", _EVERY_DIMENSION, _COUNTED, histograms=True),
    "deliveries_eventrollup": _Target("d.hour", _WITH_EVENTS, (*_EVERY_DIMENSION, "event"), _COUNTED),
    "deliveries_periodrollup": _Target(_PERIOD, "delta d", _EVERY_DIMENSION, _COUNTED, histograms=True),
    "deliveries_eventperiodrollup": _Target(_PERIOD, _WITH_EVENTS, (*_EVERY_DIMENSION, "event"), _COUNTED),
    STREAM_PERIOD_TABLE: _Target(
        _PERIOD, "delta d", _STREAM_DIMENSIONS,
        {"deliveries": "sum(d.n)", "retries_sum": "sum(d.n * d.retries)"}, histograms=True,
    ),
}


def _add_part(n: int, table: str, target: _Target) -> str:
    columns = ("source_id", "hour", "stream_id", *target.dimensions)
    picked = ", ".join(
        f"{target.hour} AS hour" if c == "hour" else "e.event" if c == "event" else f"d.{c}" for c in columns
    )
    # A group may be none on both sides; every other dimension is never null.
    match = " AND ".join(
        f"r.{c} IS NOT DISTINCT FROM a.{c}" if c == "error_group_id" else f"r.{c} = a.{c}"
        for c in ("stream_id", "hour", "source_id", *target.dimensions)
    )
    sums = ", ".join(f"{expr} AS {name}" for name, expr in target.sums.items())
    changed = [f"{expr} <> 0" for expr in target.sums.values()]
    added = [f"{name} = r.{name} + a.{name}" for name in target.sums]
    summed = tuple(target.sums)
    if target.histograms:
        sums += ", " + histogram_sums("sum(d.{column}[{i}])")
        changed.append("bool_or(d.latency_changed)")
        # A stored row from before latencies were kept has none: its histogram starts from the added counts.
        added += [
            f"{column} = ARRAY["
            + ", ".join(f"coalesce(r.{column}[{i}], 0) + a.{column}[{i}]" for i in range(1, BUCKETS + 1))
            + "]"
            for column in LATENCY_COLUMNS
        ]
        summed += LATENCY_COLUMNS
    return f"""
, sums_{n} AS MATERIALIZED (
    SELECT row_number() OVER () AS k, s.* FROM (
        SELECT {picked}, {sums}
          FROM {target.source}
         GROUP BY {", ".join(str(i) for i in range(1, len(columns) + 1))}
        HAVING {" OR ".join(changed)}
    ) s
), added_{n} AS (
    UPDATE {table} r SET {", ".join(added)}
      FROM sums_{n} a
     WHERE {match}
    RETURNING a.k
), inserted_{n} AS (
    INSERT INTO {table} ({", ".join((*columns, *summed))})
    SELECT {", ".join((*columns, *summed))} FROM sums_{n}
     WHERE deliveries > 0 AND k NOT IN (SELECT k FROM added_{n})
)"""  # noqa: S608 - table and column names are constants


# Each delta row's latency histograms travel as the text of an int array apiece (`latency_changed`: not all zero).
_ADD_DELTA = """
WITH delta AS MATERIALIZED (
    SELECT t.k, t.source_id, t.hour, t.stream_id, t.tag, t.webhook_url, t.chain_id, t.status, t.error_group_id,
           t.retries, t.n, t.lu::int[] AS latency_unconfirmed, t.lc::int[] AS latency_confirmed,
           t.lu <> %(zero)s OR t.lc <> %(zero)s AS latency_changed
      FROM unnest(%(k)s::int[], %(source)s::bigint[], %(hour)s::timestamptz[], %(stream)s::varchar[],
                  %(tag)s::varchar[], %(url)s::varchar[], %(chain)s::varchar[], %(status)s::varchar[],
                  %(group)s::bigint[], %(retries)s::int[], %(n)s::bigint[], %(lu)s::text[], %(lc)s::text[])
           AS t(k, source_id, hour, stream_id, tag, webhook_url, chain_id, status, error_group_id, retries, n, lu, lc)
), delta_events AS MATERIALIZED (
    SELECT * FROM unnest(%(event_k)s::int[], %(event)s::varchar[]) AS t(k, event)
)"""
# After a subtraction: the touched hours' (and periods') rollup rows that count nothing any more.
_DELETE_EMPTY_PART = """deleted_{n} AS (
    DELETE FROM {table} r
     USING (SELECT DISTINCT stream_id, {hour} AS hour FROM unnest(%(stream)s::varchar[], %(hour)s::timestamptz[])
                   AS d(stream_id, hour)) t
     WHERE r.stream_id = t.stream_id AND r.hour = t.hour AND r.deliveries <= 0
)"""
_DELETE_EMPTY_ROLLUPS = (
    "WITH "
    + ", ".join(_DELETE_EMPTY_PART.format(n=n, table=table, hour=target.hour)
                for n, (table, target) in enumerate(_ADD_TARGETS.items()))
    + " SELECT 1"
)
# Cached results computed from the rollups (url_health) see the change through this count.
_COUNT_CHANGE = """, counted AS (
    INSERT INTO deliveries_rollupchanges (id, changes) VALUES (1, 1)
    ON CONFLICT (id) DO UPDATE SET changes = deliveries_rollupchanges.changes + 1
)"""
_ADD_TO_ROLLUPS = (
    _ADD_DELTA
    + "".join(_add_part(n, table, target) for n, (table, target) in enumerate(_ADD_TARGETS.items()))
    + _COUNT_CHANGE
    + "\nSELECT 1"
)


class RollupDelta(NamedTuple):
    """The parameters of the statement adding counts to the rollups, and of the one deleting the rollup rows
    left counting nothing (None when no count went down)."""

    add: dict[str, Any]
    empty: dict[str, Any] | None


_ZERO_HISTOGRAM = "{" + ",".join("0" * BUCKETS) + "}"


def rollup_delta(
    counts: dict[tuple[Any, ...], int], latencies: dict[tuple[Any, ...], list[int]] | None = None
) -> RollupDelta | None:
    """What `add_to_rollups` sends for counts per hourly dimensions and event names (source, hour, stream, tag,
    URL, chain, status, group, retries, events), and for the latency histograms of the same keys (2 × BUCKETS
    counts: unconfirmed, then confirmed); None when every count is zero."""
    latencies = latencies or {}
    # In one order whatever the batch, so that writers lock rollup rows alike (None sorts first).
    deltas = sorted(
        ((key, n) for key, n in counts.items() if n or any(latencies.get(key, ()))),
        key=lambda kn: tuple((v is not None, v) for v in kn[0]),
    )
    if not deltas:
        return None
    names = ("source", "hour", "stream", "tag", "url", "chain", "status", "group", "retries")
    params: dict[str, Any] = {name: [] for name in (*names, "n", "event_k", "event", "lu", "lc")}
    for k, (key, n) in enumerate(deltas):
        for name, value in zip(names, key[:-1], strict=True):
            params[name].append(value)
        params["n"].append(n)
        params["event_k"].extend([k] * len(key[-1]))
        params["event"].extend(key[-1])
        histograms = latencies.get(key)
        if histograms is None:
            params["lu"].append(_ZERO_HISTOGRAM)
            params["lc"].append(_ZERO_HISTOGRAM)
        else:
            params["lu"].append("{" + ",".join(map(str, histograms[:BUCKETS])) + "}")
            params["lc"].append("{" + ",".join(map(str, histograms[BUCKETS:])) + "}")
    sent: dict[str, Any] = {name: array_literal(value) for name, value in params.items()}
    sent.update(
        k=array_literal(range(len(deltas))), period=ROLLUP_PERIOD, origin=PERIOD_ORIGIN, zero=_ZERO_HISTOGRAM
    )
    # After a subtraction, the touched hours' and periods' rows that count nothing any more go.
    empty = (
        {"stream": sent["stream"], "hour": sent["hour"], "period": ROLLUP_PERIOD, "origin": PERIOD_ORIGIN}
        if any(n < 0 for _key, n in deltas) else None
    )
    return RollupDelta(sent, empty)


def add_to_rollups(cursor: Any, delta: RollupDelta) -> None:
    """Add the counts of `delta` (+1 a delivery now stored, -1 one no longer stored as it was) to the rollups of
    all five tables, without reading the stored rows of their hours; rollup rows left counting nothing go."""
    cursor.execute(_ADD_TO_ROLLUPS, delta.add)
    if delta.empty is not None:
        cursor.execute(_DELETE_EMPTY_ROLLUPS, delta.empty)


# Each period rollup table, the hourly table it sums, and the columns it has beside the shared dimensions.
PERIOD_TABLES = (
    ("deliveries_periodrollup", "deliveries_hourlyrollup", ""),
    ("deliveries_eventperiodrollup", "deliveries_eventrollup", ", event"),
)
# What each period table sums beside its deliveries: the latency histograms of the period rollup.
_PERIOD_HISTOGRAMS = {"deliveries_periodrollup": (", " + ", ".join(LATENCY_COLUMNS), ", " + _SUMMED_HISTOGRAMS)}


def refresh_periods(cursor: Any, keys: Sequence[tuple[int, str, datetime]]) -> None:
    """Recompute the period rollups (all three tables) of the given (source, stream, period start) from their
    hourly rollups."""
    params = [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], ROLLUP_PERIOD]
    for table, hourly, extra in PERIOD_TABLES:
        columns, sums = _PERIOD_HISTOGRAMS.get(table, ("", ""))
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
            INSERT INTO {table} ({ROLLUP_DIMENSIONS}{extra}, deliveries{columns})
            SELECT t.source_id, t.hour, t.stream_id, {ROLLUP_COLUMNS}{extra}, sum(r.deliveries){sums}
              FROM unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)
              JOIN {hourly} r
                ON r.stream_id = t.stream_id AND r.hour >= t.hour AND r.hour < t.hour + %s
               AND r.source_id = t.source_id
             GROUP BY t.source_id, t.hour, t.stream_id, {ROLLUP_COLUMNS}{extra}
            """,  # noqa: S608 - table and column names are constants
            params,
        )
    keyed = "unnest(%s::bigint[], %s::varchar[], %s::timestamptz[]) AS t(source_id, stream_id, hour)"
    _recompute_stream_periods(
        cursor, f"USING {keyed} WHERE r.source_id = t.source_id AND r.stream_id = t.stream_id AND r.hour = t.hour",
        f"JOIN {keyed} ON r.source_id = t.source_id AND r.stream_id = t.stream_id AND r.hour = t.hour", params[:3],
    )


def recompute_periods_between(cursor: Any, start: datetime, end: datetime, source_id: int | None = None) -> None:
    """Recompute the period rollups (all three tables) of every period overlapping [start, end) from their hourly
    rollups."""
    only = "" if source_id is None else "AND source_id = %(source)s"
    params = {"start": PeriodRollup.period_of(start), "end": end, "source": source_id, "period": ROLLUP_PERIOD,
              "origin": PERIOD_ORIGIN}
    for table, hourly, extra in PERIOD_TABLES:
        columns, sums = _PERIOD_HISTOGRAMS.get(table, ("", ""))
        cursor.execute(
            f"DELETE FROM {table} WHERE hour >= %(start)s AND hour < %(end)s {only}",  # noqa: S608
            params,
        )
        cursor.execute(
            f"""
            INSERT INTO {table} ({ROLLUP_DIMENSIONS}{extra}, deliveries{columns})
            SELECT source_id, date_bin(%(period)s, hour, %(origin)s), stream_id, {ROLLUP_COLUMNS}{extra},
                   sum(deliveries){sums}
              FROM {hourly} r
             WHERE hour >= %(start)s AND hour < %(end)s + %(period)s
                   AND date_bin(%(period)s, hour, %(origin)s) < %(end)s {only}
             GROUP BY source_id, date_bin(%(period)s, hour, %(origin)s), stream_id, {ROLLUP_COLUMNS}{extra}
            """,  # noqa: S608 - table and column names are constants
            params,
        )
    within = f"WHERE r.hour >= %(start)s AND r.hour < %(end)s {only.replace('source_id', 'r.source_id')}"
    _recompute_stream_periods(cursor, within, within, params)


def _recompute_stream_periods(cursor: Any, delete_rows: str, read_rows: str, params: Any) -> None:
    """Recompute the stream period rollups of the periods that `delete_rows` (what follows `DELETE FROM table
    r`) and `read_rows` (what follows `FROM deliveries_periodrollup r`) pick, from the period rollups, which
    must be current."""
    cursor.execute(f"DELETE FROM {STREAM_PERIOD_TABLE} r {delete_rows}", params)  # noqa: S608 - constants
    cursor.execute(
        f"""
        INSERT INTO {STREAM_PERIOD_TABLE}
               (source_id, hour, stream_id, {STREAM_PERIOD_COLUMNS}, deliveries, retries_sum, {", ".join(LATENCY_COLUMNS)})
        SELECT r.source_id, r.hour, r.stream_id, r.tag, r.webhook_url, r.chain_id, r.status, sum(r.deliveries),
               sum(r.deliveries::bigint * r.retries), {_SUMMED_HISTOGRAMS}
          FROM deliveries_periodrollup r {read_rows}
         GROUP BY r.source_id, r.hour, r.stream_id, r.tag, r.webhook_url, r.chain_id, r.status
        """,  # noqa: S608 - table and column names are constants, the rows' choice a fixed fragment
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
               d.status, d.error_group_id, d.retries, {EVENT_KEYS} AS events, {LATENCY_SLOT} AS slot
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
