"""Server-side chart geometry: time buckets, stacked delivered/failed bars and sparklines, drawn as SVG by
templates. No JavaScript is needed to read a chart, and every bar is a link to its slice of the list; app.js
adds zooming by dragging across the plot (the chart's start, end and plot edges are on the SVG).

Buckets are UTC-aligned (rollups are hourly); a chart shown in another time zone writes its labels and
titles in that zone and puts its time labels where that zone's clock reads a round time."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

# Bucket widths a chart may use, narrowest first. Rollups are hourly, so they allow only >= 1 h.
STEPS: tuple[timedelta, ...] = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=15),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(hours=12),
    timedelta(days=1),
    timedelta(days=7),
)
MAX_BARS = 120
# Ranges at least this long read the hourly rollups; shorter ones read raw rows through the date indexes.
ROLLUP_FROM = timedelta(hours=24)
EPOCH = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday, so weekly buckets start on Mondays


def choose_step(span: timedelta, *, hourly_only: bool) -> timedelta:
    for step in STEPS:
        if hourly_only and step < timedelta(hours=1):
            continue
        if span / step <= MAX_BARS:
            return step
    return STEPS[-1]


def floor_to(moment: datetime, step: timedelta) -> datetime:
    """The start of the `step`-wide bucket holding `moment`, aligned like Postgres date_bin from EPOCH."""
    offset = (moment - EPOCH) // step
    return EPOCH + offset * step


@dataclass(frozen=True)
class Bucket:
    start: datetime
    end: datetime
    delivered: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.delivered + self.failed


def fill_buckets(rows: Iterable[dict[str, Any]], start: datetime, end: datetime, step: timedelta) -> list[Bucket]:
    """Every bucket from the one holding `start` to the one holding `end`, zero where no row fell."""
    by_start = {row["bucket"]: row for row in rows}
    buckets = []
    cursor = floor_to(start, step)
    while cursor < end:
        row = by_start.get(cursor, {})
        buckets.append(Bucket(cursor, cursor + step, int(row.get("delivered") or 0), int(row.get("failed") or 0)))
        cursor += step
    return buckets


def nice_ceiling(value: int) -> int:
    if value <= 4:
        return 4
    magnitude = 10 ** int(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if value <= factor * magnitude:
            return int(factor * magnitude)
    return value


@dataclass
class Bar:
    x: float
    width: float
    ok_y: float
    ok_h: float
    fail_y: float
    fail_h: float
    href: str
    title: str
    fail_href: str


@dataclass
class Tick:
    pos: float
    label: str


@dataclass
class BarChart:
    width: int
    height: int
    plot_left: int
    plot_bottom: int
    bars: list[Bar] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    delivered: int = 0
    failed: int = 0
    empty: bool = True
    # Where the first bucket starts: whole buckets reach a little further back than the range itself.
    start: datetime | None = None
    # Where the last bucket ends, and the x of the plot's right edge: dragging maps x to time between them.
    end: datetime | None = None
    plot_right: int = 0


def _label(moment: datetime, step: timedelta, span: timedelta) -> str:
    if step >= timedelta(days=1) or span > timedelta(days=3):
        return f"{moment:%b} {moment.day}" if moment.hour == 0 else f"{moment:%b} {moment.day} {moment:%H:%M}"
    return f"{moment:%H:%M}"


def bar_chart(
    buckets: list[Bucket],
    link: Callable[[Bucket, str | None], str],
    *,
    width: int = 1000,
    height: int = 200,
    zone: tzinfo = UTC,
) -> BarChart:
    """Stacked bars (delivered under failed) with a y axis of counts and about seven time labels."""
    left, right, top, bottom = 44, 8, 10, 24
    chart = BarChart(width=width, height=height, plot_left=left, plot_bottom=height - bottom)
    if not buckets:
        return chart
    chart.start, chart.end = buckets[0].start, buckets[-1].end
    plot_w = width - left - right
    chart.plot_right = left + plot_w
    plot_h = height - top - bottom
    peak = nice_ceiling(max(b.total for b in buckets))
    slot = plot_w / len(buckets)
    gap = min(2.0, slot * 0.2)
    step = buckets[0].end - buckets[0].start
    for i, b in enumerate(buckets):
        ok_h = plot_h * b.delivered / peak
        fail_h = plot_h * b.failed / peak
        base = top + plot_h
        first, last = b.start.astimezone(zone), b.end.astimezone(zone)
        title = f"{first:%Y-%m-%d %H:%M}–{last:%H:%M} {first.tzname()} · {b.delivered} delivered · {b.failed} failed"
        chart.bars.append(
            Bar(
                x=round(left + i * slot + gap / 2, 2),
                width=round(max(slot - gap, 0.5), 2),
                ok_y=round(base - ok_h, 2),
                ok_h=round(ok_h, 2),
                fail_y=round(base - ok_h - fail_h, 2),
                fail_h=round(fail_h, 2),
                href=link(b, None),
                fail_href=link(b, "failing"),
                title=title,
            )
        )
        chart.delivered += b.delivered
        chart.failed += b.failed
    chart.empty = chart.delivered + chart.failed == 0
    for fraction in (0, 0.5, 1):
        chart.y_ticks.append(Tick(round(top + plot_h * (1 - fraction), 2), f"{int(peak * fraction):,}"))
    chart.x_ticks = time_ticks([b.start for b in buckets], step, left=left, slot=slot, width=width, zone=zone)
    return chart


def time_ticks(
    starts: list[datetime], step: timedelta, *, left: float, slot: float, width: int, zone: tzinfo
) -> list[Tick]:
    """About seven time labels under slots of `slot` px starting at `starts`, on round times of the zone's
    clock (midnights, 06:00...)."""
    span = starts[-1] + step - starts[0]
    interval = label_interval(step, span)
    labelled = [i for i, start in enumerate(starts) if _on_the_clock(start, interval, zone)]
    if not labelled:
        # A zone a fraction of an hour off UTC (India, Nepal) has no round local time on hourly buckets.
        labelled = [i for i, start in enumerate(starts) if floor_to(start, interval) == start]
    ticks = []
    for i in labelled:
        if left + i * slot > width - 70:
            break  # a label this close to the right edge would be cut off
        ticks.append(Tick(round(left + i * slot, 2), _label(starts[i].astimezone(zone), step, span)))
    return ticks


def _on_the_clock(moment: datetime, interval: timedelta, zone: tzinfo) -> bool:
    """Whether the zone's wall clock reads a whole multiple of `interval` at `moment` (midnights, 06:00...)."""
    wall = moment.astimezone(zone).replace(tzinfo=None)
    return (wall - EPOCH.replace(tzinfo=None)) % interval == timedelta(0)


# Distances between time labels that read as round numbers on a clock or a calendar.
LABEL_INTERVALS = tuple(timedelta(minutes=m) for m in (1, 5, 10, 15, 30)) + tuple(
    timedelta(hours=h) for h in (1, 2, 3, 6, 12, 24, 48, 168)
)


def label_interval(step: timedelta, span: timedelta, most: int = 10) -> timedelta:
    """The smallest round distance between labels that puts at most `most` of them on the axis and lands on
    bucket starts (a whole number of buckets), so labels fall on 00:00, 06:00, midnights..."""
    for interval in LABEL_INTERVALS:
        if span / most <= interval <= span / 2 and interval % step == timedelta(0):
            return interval
    return step * math.ceil(span / step / most)


@dataclass
class Sparkline:
    width: int
    height: int
    points: str
    area: str
    peak: int


def sparkline(values: list[int], *, width: int = 120, height: int = 28) -> Sparkline:
    """A polyline (and its filled area) through the values, scaled to the box."""
    if not values:
        values = [0]
    peak = max(values) or 1
    n = len(values)
    dx = width / max(n - 1, 1)
    coords = [(round(i * dx, 1), round(height - 2 - (height - 4) * v / peak, 1)) for i, v in enumerate(values)]
    points = " ".join(f"{x},{y}" for x, y in coords)
    area = f"0,{height} {points} {coords[-1][0]},{height}"
    return Sparkline(width=width, height=height, points=points, area=area, peak=max(values))


# Tops of a latency chart's y axis, in seconds: the first at or above the highest value is used. Each top and its
# half read as round durations (no 2.5 min).
SECONDS_SCALE: tuple[float, ...] = (1, 2, 5, 10, 20, 30, 60, 120, 240, 360, 600, 1200, 1800, 3600, 7200)


def seconds_label(seconds: float) -> str:
    """An axis label of a duration: "2.5 s", "10 min", "1 h"."""
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


@dataclass(frozen=True)
class LinePoint:
    """One time slot of a line chart: a value per line (None: nothing to draw there), a title and a link."""

    start: datetime
    end: datetime
    values: tuple[float | None, ...]
    title: str
    href: str


@dataclass
class Line:
    name: str
    # Polylines' points, broken where a slot has no value; a lone point is drawn as a dot.
    segments: list[str] = field(default_factory=list)
    dots: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Slot:
    x: float
    width: float
    href: str
    title: str


@dataclass
class LineChart:
    width: int
    height: int
    plot_left: int
    plot_bottom: int
    lines: list[Line] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    empty: bool = True
    # As `BarChart`'s: where the slots start and end and the plot's right edge, for zooming by dragging.
    start: datetime | None = None
    end: datetime | None = None
    plot_right: int = 0


def line_chart(
    points: list[LinePoint], names: tuple[str, ...], *, width: int = 1000, height: int = 160, zone: tzinfo = UTC
) -> LineChart:
    """Lines of durations in seconds over time (one per name, drawn through the slots' centres), on the bar
    chart's axes: a y axis from 0 to a round duration (its labels a little wider than counts), the same time
    labels; each slot is a link."""
    left, right, top, bottom = 52, 8, 10, 24
    chart = LineChart(width=width, height=height, plot_left=left, plot_bottom=height - bottom)
    values = [v for p in points for v in p.values if v is not None]
    if not values:
        return chart
    chart.empty = False
    chart.start, chart.end = points[0].start, points[-1].end
    chart.plot_right = width - right
    peak = next((s for s in SECONDS_SCALE if s >= max(values)), SECONDS_SCALE[-1])
    plot_w = width - left - right
    plot_h = height - top - bottom
    slot = plot_w / len(points)
    for k, name in enumerate(names):
        line = Line(name)
        run: list[tuple[float, float]] = []
        # A last None closes the last run.
        for i, value in enumerate([p.values[k] for p in points] + [None]):
            if value is not None:
                y = top + plot_h * (1 - min(max(value, 0.0), peak) / peak)
                run.append((round(left + (i + 0.5) * slot, 2), round(y, 2)))
                continue
            if len(run) == 1:
                line.dots.append(run[0])
            elif run:
                line.segments.append(" ".join(f"{x},{y}" for x, y in run))
            run = []
        chart.lines.append(line)
    gap = min(2.0, slot * 0.2)
    chart.slots = [
        Slot(round(left + i * slot + gap / 2, 2), round(max(slot - gap, 0.5), 2), p.href, p.title)
        for i, p in enumerate(points)
    ]
    for fraction in (0, 0.5, 1):
        chart.y_ticks.append(Tick(round(top + plot_h * (1 - fraction), 2), seconds_label(peak * fraction)))
    step = points[0].end - points[0].start
    chart.x_ticks = time_ticks([p.start for p in points], step, left=left, slot=slot, width=width, zone=zone)
    return chart
