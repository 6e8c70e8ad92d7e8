"""Delivered and failed counts over exact trailing windows ("the last 24 hours" up to this second), at a
cost that does not grow with the daily rate: the whole hours inside a window come from the hourly rollups,
and only the partial hour at each end from raw deliveries. The sum is what counting the raw rows of the
whole window gives, because ingest keeps the rollups exact.

Each raw part is counted by two index-only range scans, of `delivery_date_id` (every row) and of the
partial index of failing rows, never by reading the rows: an hour holds ~40 k rows at 1 M deliveries a day,
which a count reading the table would fetch one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, router
from django.db.models import Count, Q, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from dashboard import visibility
from dashboard.deliveries.latency import BUCKETS, bucket_sql, empty
from dashboard.deliveries.models import Delivery, HourlyRollup, Stream
from dashboard.deliveries.status import DeliveryStatus

HOUR = timedelta(hours=1)

# A stretch of raw rows: dated from `start` on, before `end` (or up to and including it).
Stretch = tuple[datetime, datetime, bool]


def _ceil_hour(moment: datetime) -> datetime:
    floor = HourlyRollup.hour_of(moment)
    return floor if floor == moment else floor + HOUR


def trailing_counts(now: datetime, hours: Iterable[int]) -> dict[str, int]:
    """`total_H` and `failed_H` (not delivered) of the deliveries dated in [now - H hours, now], per H."""
    current_hour = HourlyRollup.hour_of(now)
    failing = ~Q(status=DeliveryStatus.DELIVERED)
    rollup_sums: dict[str, Any] = {}
    first_whole_hours: list[datetime] = []
    raw: dict[int, list[Stretch]] = {}
    for h in sorted(set(hours)):
        since = now - timedelta(hours=h)
        first_whole = _ceil_hour(since)
        if first_whole < current_hour:
            whole = Q(hour__gte=first_whole, hour__lt=current_hour)
            rollup_sums[f"total_{h}"] = Coalesce(Sum("deliveries", filter=whole), 0)
            rollup_sums[f"failed_{h}"] = Coalesce(Sum("deliveries", filter=whole & failing), 0)
            first_whole_hours.append(first_whole)
            raw[h] = [(since, first_whole, False), (current_hour, now, True)]
        else:
            raw[h] = [(since, now, True)]
    stretches = sorted({s for parts in raw.values() for s in parts if s[0] < s[1] or s[2]})
    counted = dict(zip(stretches, _stretch_counts(stretches), strict=True))
    result: dict[str, int] = {}
    for h, parts in raw.items():
        result[f"total_{h}"] = sum(counted[s][0] for s in parts if s in counted)
        result[f"failed_{h}"] = sum(counted[s][1] for s in parts if s in counted)
    if rollup_sums:
        whole_hours = HourlyRollup.objects.between(min(first_whole_hours), current_hour)
        for key, value in whole_hours.aggregate(**rollup_sums).items():
            result[key] += value
    return result


def _stretch_counts(stretches: list[Stretch]) -> list[tuple[int, int]]:
    """(rows, failing rows) dated in each stretch, in one query of index-only range counts."""
    if not stretches:
        return []
    table = Delivery._meta.db_table
    # The viewer's streams ("TRUE" for every stream); with it the counts read the (stream, date) index instead.
    seen, seen_params = visibility.sql("stream_id")
    parts: list[str] = []
    params: list[Any] = []
    for start, end, inclusive in stretches:
        until = "<=" if inclusive else "<"
        # The failing count's condition is the partial index's own, so the scan stays on that index.
        parts.append(f"(SELECT count(*) FROM {table} WHERE date >= %s AND date {until} %s AND {seen})")  # noqa: S608
        parts.append(
            f"(SELECT count(*) FROM {table} WHERE NOT (status = %s) AND date >= %s AND date {until} %s"  # noqa: S608
            f" AND {seen})"
        )
        # The provider's test webhooks are no chain events (the rollups leave them out too); they are few, and
        # counted through their own partial index rather than filtered from the index-only counts above.
        parts.append(
            f"(SELECT count(*) FROM {table} WHERE is_test AND date >= %s AND date {until} %s AND {seen})"  # noqa: S608
        )
        parts.append(
            f"(SELECT count(*) FROM {table} WHERE is_test AND NOT (status = %s)"  # noqa: S608
            f" AND date >= %s AND date {until} %s AND {seen})"
        )
        params += [start, end, *seen_params, DeliveryStatus.DELIVERED, start, end, *seen_params]
        params += [start, end, *seen_params, DeliveryStatus.DELIVERED, start, end, *seen_params]
    # Where the router reads deliveries: the read replica on the pages that use one.
    with connections[router.db_for_read(Delivery)].cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)  # noqa: S608 - the model's table; values are parameters
        row = cursor.fetchone()
    return [
        (int(row[i]) - int(row[i + 2]), int(row[i + 1]) - int(row[i + 3])) for i in range(0, len(row), 4)
    ]


@dataclass
class StreamCounts:
    """A stream's deliveries in a window: all of them, those not delivered, those not delivered on the first attempt
    (not delivered, or delivered after a retry), and the latency histogram of the unconfirmed ones."""

    total: int = 0
    failed: int = 0
    not_first: int = 0
    latency: list[int] = field(default_factory=empty)


def trailing_stream_counts(
    now: datetime, starts: Sequence[datetime], scope: tuple[str, str] | None = None
) -> dict[datetime, dict[str, StreamCounts]]:
    """Per window [start, now] (one per start) and per stream, its `StreamCounts`: the whole hours of every window
    from the hourly rollups in one query, the partial hours at their ends from the raw rows in another (the union of
    their stretches read once, each window's rows picked by a filter, grouped by latency bucket in the database).
    `scope` narrows both to (column, value) of a stream id, tag or webhook URL."""
    current_hour = HourlyRollup.hour_of(now)
    narrow = {scope[0]: scope[1]} if scope else {}
    failed = ~Q(status=DeliveryStatus.DELIVERED)
    not_first = failed | Q(retries__gt=0)
    whole: dict[datetime, Q] = {}
    edges: dict[datetime, Q] = {}
    for start in set(starts):
        first_whole = _ceil_hour(start)
        if first_whole < current_hour:
            whole[start] = Q(hour__gte=first_whole, hour__lt=current_hour)
            edges[start] = Q(date__gte=start, date__lt=first_whole) | Q(date__gte=current_hour, date__lte=now)
        else:
            edges[start] = Q(date__gte=start, date__lte=now)
    found: dict[datetime, dict[str, StreamCounts]] = {start: {} for start in starts}
    if whole:
        sums: dict[str, Any] = {}
        for n, hours in enumerate(whole.values()):
            sums[f"t{n}"] = Coalesce(Sum("deliveries", filter=hours), 0)
            sums[f"f{n}"] = Coalesce(Sum("deliveries", filter=hours & failed), 0)
            sums[f"n{n}"] = Coalesce(Sum("deliveries", filter=hours & not_first), 0)
            for i in range(BUCKETS):
                sums[f"u{n}_{i}"] = Coalesce(Sum(f"latency_unconfirmed__{i}", filter=hours), 0)
        rows: Any = (
            HourlyRollup.objects.between(min(_ceil_hour(s) for s in whole), current_hour).filter(**narrow)
            .values("stream_id").annotate(**sums).order_by()
        )
        for row in rows:
            for n, start in enumerate(whole):
                if row[f"t{n}"]:
                    found[start][row["stream_id"]] = StreamCounts(
                        row[f"t{n}"], row[f"f{n}"], row[f"n{n}"], [row[f"u{n}_{i}"] for i in range(BUCKETS)]
                    )
    any_edge = Q()
    for stretch in edges.values():
        any_edge |= stretch
    counts: dict[str, Any] = {}
    for n, stretch in enumerate(edges.values()):
        counts[f"t{n}"] = Count("id", filter=stretch)
        counts[f"f{n}"] = Count("id", filter=stretch & failed)
        counts[f"n{n}"] = Count("id", filter=stretch & not_first)
    # Bucket 0: no latency to count (a confirmed delivery, or one without a block time).
    bucket = f"CASE WHEN confirmed OR latency_ms IS NULL THEN 0 ELSE {bucket_sql('latency_ms')} END"
    raw: Any = (
        Delivery.objects.chain_events().filter(any_edge, **narrow)
        .annotate(bucket=RawSQL(bucket, ()))  # noqa: S611 - constant SQL of fixed bounds
        .values("stream_id", "bucket").annotate(**counts).order_by()
    )
    for row in raw:
        for n, start in enumerate(edges):
            if not row[f"t{n}"]:
                continue
            into = found[start].setdefault(row["stream_id"], StreamCounts())
            into.total += row[f"t{n}"]
            into.failed += row[f"f{n}"]
            into.not_first += row[f"n{n}"]
            if row["bucket"]:
                into.latency[row["bucket"] - 1] += row[f"t{n}"]
    return found


def trailing_latencies(
    since: datetime, now: datetime, scope: tuple[str, str] | None = None
) -> dict[str, tuple[list[int], str, str]]:
    """Per stream, the latency histogram (`latency.py`) of its unconfirmed deliveries dated in [since, now], with
    its tag and a webhook URL (`trailing_stream_counts`' histograms)."""
    histograms = {stream: counts.latency for stream, counts in trailing_stream_counts(now, [since], scope)[since].items()}
    labels = {
        s.stream_id: (s.tag, next(iter(s.webhook_urls or []), ""))
        for s in Stream.objects.filter(stream_id__in=list(histograms)).only("stream_id", "tag", "webhook_urls")
    }
    return {stream: (h, *labels.get(stream, ("", ""))) for stream, h in histograms.items() if any(h)}
