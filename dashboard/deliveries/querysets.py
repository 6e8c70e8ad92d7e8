"""Query building blocks the delivery QuerySets (in models.py) share: the slice filters both tables
understand, so a chart drawn from the rollups and a list read from raw deliveries always agree on what a
slice is, Postgres's date_bin, and arrays sent as one literal (the `__any` lookup, and ingest's statements)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Value

from dashboard.deliveries.latency import BUCKETS
from dashboard.deliveries.status import FAILING_STATUSES


class DateBin(models.Func):
    """Postgres `date_bin(stride, source, origin)`: the start of the fixed-width bucket holding `source`."""

    function = "date_bin"
    output_field = models.DateTimeField()

    def __init__(self, stride: timedelta, expression: Any, origin: datetime) -> None:
        super().__init__(
            Value(stride, output_field=models.DurationField()),
            expression,
            Value(origin, output_field=models.DateTimeField()),
        )


class LatencyPercentiles(models.Aggregate):
    """Postgres `percentile_cont(ARRAY[...]) WITHIN GROUP (ORDER BY latency_ms)`, in seconds: the exact
    percentiles (`latency.PERCENTILES`) of the rows' latencies, interpolated between the two nearest rows."""

    function = "percentile_cont"
    template = "%(function)s(ARRAY[%(fractions)s]) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = ArrayField(models.FloatField())

    def __init__(self, expression: Any, percentiles: tuple[int, ...]) -> None:
        # Constants of the code, never input: written into the SQL.
        fractions = ", ".join(f"{p / 100:.4f}" for p in percentiles)
        super().__init__(expression, fractions=fractions)


class HistogramSum(models.Aggregate):
    """The rollups' latency histograms (an integer array column, `latency.BUCKETS` long) summed bucket by bucket
    into one array: `ARRAY[COALESCE(SUM(col[1]), 0), …]`. A NULL array (a row from before latencies were kept)
    counts nothing. The expression is written once per bucket, so it must be a plain column (no parameters)."""

    output_field = ArrayField(models.BigIntegerField())

    def __init__(self, expression: Any) -> None:
        sums = ", ".join(f"COALESCE(SUM((%(expressions)s)[{i}]), 0)" for i in range(1, BUCKETS + 1))
        super().__init__(expression, template=f"ARRAY[{sums}]")


class KeyHashes(models.Func):
    """`delivery_key_hashes(keys)`: each search key as its 64-bit hash (`hashtextextended(key, 0)`), in one
    SQL function (migration 0025) that both the GIN index `delivery_search_hashes` and every search apply: the
    index holds 8 bytes a key instead of its text (a tx key is 69 characters). Hashes can collide, so a search
    also checks the keys themselves (`DeliveryQuerySet.with_any_key`). A list of keys is passed as one
    `varchar[]` parameter, the type of the column."""

    function = "delivery_key_hashes"
    output_field = ArrayField(models.BigIntegerField())

    def __init__(self, keys: Any) -> None:
        if isinstance(keys, list):
            keys = models.Func(Value(keys), template="%(expressions)s::varchar[]",
                               output_field=ArrayField(models.CharField(max_length=80)))
        super().__init__(keys)


@models.Field.register_lookup
class AnyOf(models.Lookup):
    """`field__any=values`: `field = ANY('{…}'::type[])`, the values sent as one array literal. Answers what
    `__in` does for the thousands of ids a search key's index gives, where `__in` (a placeholder and a quoted
    literal per value, built by the client-side binding) cost more than the query: 12 ms of the client's
    time for 2,000 ids and dates, against ~1 ms of execution. The values must be of the column's Python type
    (ids as UUIDs, dates aware); each is written as its text and quoted as an array element.

    One value is compared with `=`, as Postgres rewrites a one-element IN: an index on the column then gives
    its rows in the index's order (PostgreSQL 15 gives no order across the elements of an array)."""

    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        cast = self.lhs.output_field.cast_db_type(connection)
        values = list(self.rhs)
        if len(values) == 1:
            return f"{lhs} = %s::{cast}", (*lhs_params, values[0])
        return f"{lhs} = ANY(%s::{cast}[])", (*lhs_params, array_literal(values))


def array_literal(values: Iterable[Any]) -> str:
    """A Postgres array literal of the values' text forms, every element double-quoted (NULL for None), for a
    parameter cast to an array type. The client-side binding quotes one string where it would adapt and quote
    each element of a list: ~2 µs a UUID, ~3.5 µs a date, which for the thousand ids of an ingest batch cost
    more than the statement's execution."""
    return "{" + ",".join(
        "NULL" if v is None else '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values
    ) + "}"


class SliceFilters:
    """Filters both tables understand; `None` or "" means "any"."""

    def slice(
        self,
        *,
        stream_id: str | None = None,
        tag: str | None = None,
        webhook_url: str | None = None,
        chain_id: str | None = None,
        status: str | None = None,
        error_group_id: int | None = None,
        with_error_text: bool = False,
    ) -> Any:
        """`with_error_text`: the caller also filters on an error text, which only failing deliveries have."""
        qs: Any = self
        if stream_id:
            qs = qs.filter(stream_id=stream_id)
        # An empty tag is a real value upstream, so only None skips the filter.
        if tag is not None:
            qs = qs.filter(tag=tag)
        if webhook_url:
            qs = qs.filter(webhook_url=webhook_url)
        if chain_id:
            qs = qs.filter(chain_id=chain_id)
        if status == "failing":
            # Every delivery of an error group is failing (a group is given to a non-empty error message only,
            # and such a message makes the status retrying or failed: status.delivery_status), so beside a
            # group or an error text the status adds nothing but a second index for the planner to combine:
            # the count of a group's failing rows read both (26 ms at 2 M rows) where the group's index alone
            # takes 3 ms.
            if not (error_group_id or with_error_text):
                qs = qs.filter(status__in=FAILING_STATUSES)
        elif status:
            qs = qs.filter(status=status)
        if error_group_id:
            qs = qs.filter(error_group_id=error_group_id)
        return qs
