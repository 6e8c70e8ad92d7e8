"""How many rows a filter of the deliveries table matches, without COUNT(*) over millions of rows: exact up
to a bound (a COUNT over a LIMIT subquery, which stops early), the planner's estimate beyond it. When the
planner already expects twice the bound or more (a busy address, a common status, the whole table), the
estimate is all that is read: counting would fetch thousands of heap rows only to say "more than the
bound"; a count up to a hundred rows in the page's order, which a busy filter reaches in a few entries of the
index the page walks, first makes sure
the statistics are not stale (a table just emptied by retention still "holds" millions until the next
ANALYZE). A count that would take longer than COUNT_BUDGET_MS (a rare value spread over the whole table,
read far to find the bound's rows) is cancelled and the estimate shown instead. The admin's paginator and
the deliveries list both count through here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import OperationalError, connections, transaction
from django.db.models import QuerySet

# Up to this many matching rows the count is exact.
EXACT_LIMIT = 10_000
# A filter the planner expects to match this many times the exact limit or more is not counted at all.
ESTIMATE_ONLY_FACTOR = 2
# ... once this many rows are seen to match; fewer are counted exactly.
PROBE_ROWS = 100


@dataclass(frozen=True)
class RowCount:
    rows: int
    # True when `rows` is the planner's estimate (more than the exact limit match, or the planner expects
    # ESTIMATE_ONLY_FACTOR times more).
    estimated: bool
    # Set when the count stopped at the exact limit while the planner expected fewer than
    # ESTIMATE_ONLY_FACTOR times it: all that is known is "more than this many" (an estimate that low is
    # often stale statistics, and would understate the match). `rows` is then the larger of the two, for
    # paging.
    more_than: int | None = None


def bounded_count(queryset: QuerySet[Any], exact_limit: int | None = None) -> RowCount:
    """An EXPLAIN (which reads no rows), then the count up to `exact_limit` (EXACT_LIMIT unless
    given) rows; or, when the planner expects ESTIMATE_ONLY_FACTOR times that or more, the count up to
    PROBE_ROWS rows only, which is exact when the statistics were wrong and else gives way to the estimate."""
    exact_limit = EXACT_LIMIT if exact_limit is None else exact_limit
    ordered, queryset = queryset, queryset.order_by()
    estimate = planner_estimate(queryset)
    if estimate >= ESTIMATE_ONLY_FACTOR * exact_limit:
        probe = min(PROBE_ROWS, exact_limit)
        # In the page's order: a filter this common is met every few rows of the index the page walks (a busy
        # address: 1 ms), where an unordered probe may read its whole posting list first (15 ms at 10 M rows).
        seen = count_within(ordered, probe + 1)
        if seen is not None and seen <= probe:
            return RowCount(seen, estimated=False)
        return RowCount(estimate, estimated=True)
    bounded = count_within(queryset, exact_limit + 1)
    if bounded is None:
        return RowCount(estimate, estimated=True)
    if bounded <= exact_limit:
        return RowCount(bounded, estimated=False)
    return RowCount(max(bounded, estimate), estimated=True, more_than=exact_limit)


def count_within(queryset: QuerySet[Any], limit: int) -> int | None:
    """COUNT over the first `limit` rows, or None when it takes longer than COUNT_BUDGET_MS (the statement is
    cancelled by the server; the savepoint keeps any surrounding transaction usable)."""
    connection = connections[queryset.db]
    # Inside a caller's transaction the setting would outlive the savepoint: it is put back after the count.
    nested = connection.in_atomic_block
    try:
        with transaction.atomic(using=queryset.db):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    [f"{settings.COUNT_BUDGET_MS}ms"],
                )
                previous = cursor.fetchone()[0]
            counted = queryset[:limit].count()
            if nested:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
            return counted
    except OperationalError as exc:
        if isinstance(exc.__cause__, psycopg.errors.QueryCanceled):
            return None
        raise


def planner_estimate(queryset: QuerySet[Any]) -> int:
    """The row count Postgres expects for the query, from its statistics; reads no rows. Planned for the key
    alone: the columns and the joins a page selects change no count, and each joined table would be planned
    against every partition."""
    try:
        sql, params = queryset.values("pk").query.sql_with_params()
    except EmptyResultSet:  # `.none()`, or a filter Django knows matches nothing
        return 0
    with connections[queryset.db].cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str | bytes):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
