"""A slice's processing latency over a window, for the latency panels of the stream page and the timeline: p50,
p95 and p99 of its unconfirmed and confirmed deliveries over the whole window, per time bucket and, optionally,
per value of one dimension (the timeline's per-chain table), all from one grouped read of the rollups' latency
histograms (`RollupWindow.latency_bucketed`: whole six-hour periods from the stream period rollups, the edge
hours from the hourly rollups), never from raw rows; and the deliveries list's links to the slowest of them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from dashboard.deliveries.latency import BOUNDS, EXACT_UP_TO, Latencies, Percentiles, added, percentile
from dashboard.deliveries.links import SLICE_FILTERS, deliveries_list_query
from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.web.charts import EPOCH, LineChart, LinePoint, line_chart
from dashboard.web.forms import Window

LINK_FORMAT = "%Y-%m-%dT%H:%M:%S"
LINES = ("p50", "p95", "p99")


# At most this many points over time: a long custom window (up to the rollups' retention) takes wider buckets.
MAX_POINTS = 120


def latency_step(span: timedelta) -> timedelta:
    """Whole six-hour periods beyond two days (several, past MAX_POINTS of them), so the stream period rollups
    answer; hours below (the rollups' grain, so a window shorter than a day still gets its hours)."""
    if span <= timedelta(days=2):
        return timedelta(hours=1)
    period = timedelta(hours=6)
    return period * max(1, math.ceil(span / (MAX_POINTS * period)))


@dataclass(frozen=True)
class SliceLatency:
    """The percentiles of a slice over `window`: whole (`latency`), per `step` bucket in time order
    (`over_time`), per value of the dimension read (`by`, ordered by value) and the slowest deliveries' list
    queries (at the window's p95)."""

    window: Window
    slice: dict[str, Any]
    step: timedelta
    latency: Latencies
    over_time: list[tuple[datetime, Latencies]]
    by: list[tuple[Any, Latencies]]
    slowest_unconfirmed: str
    slowest_confirmed: str
    # The percentiles read from the slice's rows (at most EXACT_UP_TO deliveries), not interpolated.
    exact: bool = False

    @property
    def empty(self) -> bool:
        return not (self.latency.unconfirmed.count or self.latency.confirmed.count)

    @property
    def step_seconds(self) -> float:
        return self.step.total_seconds()

    @property
    def rows(self) -> list[tuple[str, Percentiles, str]]:
        return [
            ("Unconfirmed", self.latency.unconfirmed, self.slowest_unconfirmed),
            ("Confirmed", self.latency.confirmed, self.slowest_confirmed),
        ]

    @property
    def by_rows(self) -> list[tuple[Any, tuple[Percentiles, Percentiles]]]:
        return [(value, (latency.unconfirmed, latency.confirmed)) for value, latency in self.by]


def summed(parts: Iterable[Latencies]) -> Latencies:
    """Latencies of several groups merged: their histograms added bucket by bucket."""
    parts = list(parts)
    return Latencies.of(
        added(*(p.unconfirmed_buckets for p in parts)), added(*(p.confirmed_buckets for p in parts))
    )


def _add(into: dict[Any, tuple[list[int], list[int]]], key: Any, unconfirmed: list[int], confirmed: list[int]) -> None:
    """Add a group's two histograms to the sums kept under `key` (new lists: the group's own are never changed)."""
    sums = into.get(key)
    if sums is None:
        into[key] = (unconfirmed, confirmed)
    else:
        into[key] = (
            [a + b for a, b in zip(sums[0], unconfirmed, strict=True)],
            [a + b for a, b in zip(sums[1], confirmed, strict=True)],
        )


def read(window: Window, slice_kwargs: dict[str, Any], *, by: str = "") -> SliceLatency:
    """The slice's latency over the window (all time: the raw history's retention), from the rollup hours from
    the one holding its start; with `by` (a rollup dimension), also per value of it, from the same read."""
    start = window.start or timezone.now() - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    step = latency_step((window.end or timezone.now()) - start)
    fields = (by,) if by else ()
    rows = (
        RollupWindow.between(start, window.end, step=step, per_stream=True)
        .slice(**slice_kwargs)
        .latency_histograms(EPOCH, step, *fields)
    )
    # The groups' histograms added per bucket and per value; percentiles only of those sums (not of every
    # bucket and value, 600 rows for 30 days of five chains).
    per_bucket: dict[datetime, tuple[list[int], list[int]]] = {}
    per_value: dict[Any, tuple[list[int], list[int]]] = {}
    for bucket, key, unconfirmed, confirmed in rows:
        _add(per_bucket, bucket, unconfirmed, confirmed)
        if by:
            _add(per_value, key[0], unconfirmed, confirmed)
    over_time = [(bucket, Latencies.of(*sums)) for bucket, sums in per_bucket.items()]
    latency = summed(t for _bucket, t in over_time)
    by_value = [(value, Latencies.of(*sums)) for value, sums in sorted(per_value.items())]
    slowest_u, slowest_c = slowest_from(latency.unconfirmed_buckets), slowest_from(latency.confirmed_buckets)
    read_exactly = False
    if 0 < latency.unconfirmed.count + latency.confirmed.count <= EXACT_UP_TO:
        # Few enough to read: the window's (and each chain's) percentiles exactly, and the links from the exact p95;
        # the points over time stay the histograms' (a third read of the same rows for a chart).
        deliveries = Delivery.objects.filter(date__gte=HourlyRollup.hour_of(start)).slice(**slice_kwargs)
        if window.end is not None:
            deliveries = deliveries.filter(date__lt=_ceil_hour(window.end))
        latency = exact(latency, deliveries.latency_percentiles())
        if by:
            per_by = _grouped(deliveries.latency_percentiles(by), by)
            by_value = [(value, exact(parts, per_by.get(value, []))) for value, parts in by_value]
        slowest_u, slowest_c = latency.unconfirmed.p95, latency.confirmed.p95
        read_exactly = True
    return SliceLatency(
        window=window,
        slice=slice_kwargs,
        step=step,
        latency=latency,
        over_time=over_time,
        by=by_value,
        slowest_unconfirmed=slowest_query(slice_kwargs, window, confirmed=False, p95=slowest_u),
        slowest_confirmed=slowest_query(slice_kwargs, window, confirmed=True, p95=slowest_c),
        exact=read_exactly,
    )


def _ceil_hour(moment: datetime) -> datetime:
    floor = HourlyRollup.hour_of(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[Any, list[dict[str, Any]]]:
    """The rows of `latency_percentiles` per value of `key`."""
    found: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row[key], []).append(row)
    return found


def exact_per_stream(latencies: dict[tuple[Any, ...], Latencies], since: datetime) -> dict[tuple[Any, ...], Latencies]:
    """Per-stream latencies of unconfirmed deliveries (keyed `(stream_id,)`, from the histograms of the hours from
    `since`) with the exact percentiles of the smallest streams, as many as hold EXACT_UP_TO deliveries together, in
    one grouped read of their rows; the others as they are."""
    chosen: list[str] = []
    total = 0
    for (stream_id,), latency in sorted(latencies.items(), key=lambda item: item[1].unconfirmed.count):
        count = latency.unconfirmed.count
        if total + count > EXACT_UP_TO:
            break
        chosen.append(stream_id)
        total += count
    if not chosen:
        return latencies
    rows = _grouped(
        Delivery.objects.filter(date__gte=since, stream_id__in=chosen, confirmed=False).latency_percentiles("stream_id"),
        "stream_id",
    )
    return {key: exact(latency, rows.get(key[0], [])) if key[0] in rows else latency for key, latency in latencies.items()}


def exact(latencies: Latencies, rows: list[dict[str, Any]]) -> Latencies:
    """`latencies` (from the histograms) with the rows' exact percentiles (`DeliveryQuerySet.latency_percentiles`:
    a row per confirmation) in place of the interpolated ones; the histograms kept."""
    percentiles = {row["confirmed"]: Percentiles(row["n"], *row["p"]) for row in rows}
    none = Percentiles(0, None, None, None)
    return Latencies(percentiles.get(False, none), percentiles.get(True, none), latencies.unconfirmed_buckets,
                     latencies.confirmed_buckets)


def slowest_from(histogram: Sequence[int]) -> float | None:
    """Where a histogram's slowest deliveries begin, for the link to them: its p95, or the lower bound of its slowest
    non-empty bucket when that is lower. The p95 is interpolated within its bucket as if that bucket's deliveries
    spread up to its upper bound; in the slowest bucket they may all lie below the p95 read (Ethereum's confirmed
    deliveries, 145–149 s, read a p95 of 291 s in the 120–300 s bucket; a slow period's few late ones of 305–350 s,
    435 s), and a link at the p95 would list none. Every delivery of the slowest bucket lies above its lower bound,
    so the link lists them all: more than the slowest 5 % where the histogram cannot tell them apart, never none."""
    p95 = percentile(histogram, 95)
    slowest = max((i for i, n in enumerate(histogram) if n), default=None)
    if p95 is None or slowest is None:
        return p95
    return min(p95, float(BOUNDS[slowest - 1]) if slowest else 0.0)


def min_latency(p95: float | None) -> str:
    """The deliveries list's `min_latency` (seconds, to the millisecond) selecting exactly the deliveries at or
    above `p95`: latencies are whole milliseconds, so the p95 rounded up to one."""
    millis = math.ceil(round((p95 or 0) * 1000, 6))
    return f"{millis / 1000:.3f}".rstrip("0").rstrip(".")


def slowest_query(
    slice_kwargs: dict[str, Any], window: Window, *, confirmed: bool, p95: float | None
) -> str:
    """The deliveries list's query of the slice's deliveries in the window at or above `p95`."""
    custom = window.preset == "custom"
    return deliveries_list_query(
        **{SLICE_FILTERS[name]: value for name, value in slice_kwargs.items() if value},
        confirmed="true" if confirmed else "false",
        min_latency=min_latency(p95),
        range=window.preset,
        start=window.start.astimezone(UTC).strftime(LINK_FORMAT) if custom and window.start else None,
        end=window.end.astimezone(UTC).strftime(LINK_FORMAT) if custom and window.end else None,
    )


@dataclass(frozen=True)
class LatencyChart:
    label: str
    percentiles: Percentiles
    chart: LineChart


def charts(result: SliceLatency, *, zone: tzinfo = UTC, width: int = 1000, height: int = 160) -> list[LatencyChart]:
    """p50, p95 and p99 over time, one chart for the unconfirmed deliveries and one for the confirmed (whose
    latencies include finality, minutes where the unconfirmed take seconds); a chart for each that has any. A
    bucket links to its own slowest deliveries (`slowest_from`)."""
    start = result.over_time[0][0] if result.over_time else None
    if start is None:
        return []
    end = result.over_time[-1][0] + result.step
    buckets = dict(result.over_time)
    base = reverse("web:deliveries") + "?"
    made = []
    for label, confirmed in (("Unconfirmed", False), ("Confirmed", True)):
        whole = result.latency.confirmed if confirmed else result.latency.unconfirmed
        if not whole.count:
            continue
        points = []
        cursor = start
        while cursor < end:
            latency = buckets.get(cursor)
            p = (latency.confirmed if confirmed else latency.unconfirmed) if latency else None
            histogram = (latency.confirmed_buckets if confirmed else latency.unconfirmed_buckets) if latency else ()
            points.append(_point(result, cursor, p, slowest_from(histogram), confirmed, zone, base))
            cursor += result.step
        made.append(LatencyChart(label, whole, line_chart(points, LINES, width=width, height=height, zone=zone)))
    return made


def _point(
    result: SliceLatency, start: datetime, p: Percentiles | None, slowest: float | None, confirmed: bool,
    zone: tzinfo, base: str,
) -> LinePoint:
    end = start + result.step
    first, last = start.astimezone(zone), end.astimezone(zone)
    when = f"{first:%Y-%m-%d %H:%M}–{last:%H:%M} {first.tzname()}"
    if p is None or not p.count:
        return LinePoint(start, end, (None, None, None), f"{when} · no delivery with a latency", "")
    figures = " · ".join(f"{name} {value or 0:.1f} s" for name, value in zip(LINES, (p.p50, p.p95, p.p99), strict=True))
    title = f"{when} · {figures} · {p.count:,} deliveries"
    bucket_window = Window(start, end, "custom")
    href = base + slowest_query(result.slice, bucket_window, confirmed=confirmed, p95=slowest)
    return LinePoint(start, end, (p.p50, p.p95, p.p99), title, href)
