"""How many rows a filter of the deliveries table matches, without COUNT(*) over millions of rows: exact up
to a bound (a COUNT over a LIMIT subquery, which stops early), the planner's estimate beyond it. The admin's
paginator and the deliveries list both count through here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet

# Up to this many matching rows the count is exact.
EXACT_LIMIT = 10_000


@dataclass(frozen=True)
class RowCount:
    rows: int
    # True when `rows` is the planner's estimate (more than the exact limit match).
    estimated: bool


def bounded_count(queryset: QuerySet[Any], exact_limit: int | None = None) -> RowCount:
    """One query up to `exact_limit` rows (EXACT_LIMIT unless given); one more (an EXPLAIN, which reads no
    rows) beyond it."""
    exact_limit = EXACT_LIMIT if exact_limit is None else exact_limit
    queryset = queryset.order_by()
    bounded = queryset[: exact_limit + 1].count()
    if bounded <= exact_limit:
        return RowCount(bounded, estimated=False)
    return RowCount(max(bounded, planner_estimate(queryset)), estimated=True)


def planner_estimate(queryset: QuerySet[Any]) -> int:
    """The row count Postgres expects for the query, from its statistics; reads no rows."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str | bytes):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
