"""The latency chart's geometry (charts.line_chart): lines broken where a bucket has no latency, a lone point
drawn as a dot, a y axis up to a round duration, slots linked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.web.charts import LinePoint, line_chart, seconds_label
from dashboard.web.latency_panel import latency_step

START = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


def point(i: int, *values: float | None) -> LinePoint:
    start = START + i * HOUR
    return LinePoint(start, start + HOUR, values, f"bucket {i}", f"/deliveries/?i={i}" if values[0] else "")


def test_lines_break_where_a_bucket_has_no_latency() -> None:
    points = [point(0, 1.0, 3.0), point(1, 1.5, 4.0), point(2, None, None), point(3, 2.0, 45.0)]
    chart = line_chart(points, ("p50", "p99"))
    p50, p99 = chart.lines
    assert len(p50.segments) == 1 and len(p50.segments[0].split()) == 2 and len(p50.dots) == 1
    assert p99.name == "p99" and len(p99.dots) == 1
    # 45 s is above 30 s: the axis goes to a minute, its middle at 30 s.
    assert [t.label for t in chart.y_ticks] == ["0 s", "30 s", "1 min"]
    assert chart.start == START and chart.end == START + 4 * HOUR and not chart.empty
    assert [s.href for s in chart.slots][2] == "" and chart.slots[3].href.endswith("i=3")


def test_no_value_is_an_empty_chart() -> None:
    assert line_chart([point(0, None, None)], ("p50", "p99")).empty
    assert line_chart([], ("p50",)).empty


def test_axis_labels_read_as_durations() -> None:
    assert [seconds_label(v) for v in (0.5, 30, 120, 600, 3600, 7200)] == ["0.5 s", "30 s", "2 min", "10 min", "1 h", "2 h"]


def test_a_long_window_takes_wider_buckets_of_whole_periods() -> None:
    day = timedelta(days=1)
    assert [latency_step(span) for span in (HOUR, 2 * day, 7 * day, 30 * day)] == [HOUR, HOUR, 6 * HOUR, 6 * HOUR]
    # 90 days in at most 120 points, each a whole number of six-hour periods.
    assert latency_step(90 * day) == 18 * HOUR
