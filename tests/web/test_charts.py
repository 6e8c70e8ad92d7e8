"""Chart geometry: where the time labels fall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.web.charts import Bucket, bar_chart, choose_step, fill_buckets


def _labels(start: datetime, span: timedelta) -> list[str]:
    step = choose_step(span, hourly_only=span >= timedelta(hours=24))
    buckets = fill_buckets([], start, start + span, step)
    return [t.label for t in bar_chart(buckets, lambda b, status: "#").x_ticks]


def test_a_week_is_labelled_at_midnights() -> None:
    labels = _labels(datetime(2026, 11, 16, 18, 20, tzinfo=UTC), timedelta(days=7))
    assert labels == ["Nov 17", "Nov 18", "Nov 19", "Nov 20", "Nov 21", "Nov 22", "Nov 23"]


def test_a_day_is_labelled_every_three_hours_on_the_clock() -> None:
    start = datetime(2026, 11, 22, 18, 20, tzinfo=UTC)
    labels = _labels(start, timedelta(hours=24))
    assert labels == ["18:00", "21:00", "00:00", "03:00", "06:00", "09:00", "12:00", "15:00"]
    # Whole hourly buckets start at 18:00, before the range does; the chart says where.
    buckets = fill_buckets([], start, start + timedelta(hours=24), timedelta(hours=1))
    assert bar_chart(buckets, lambda b, status: "#").start == datetime(2026, 11, 22, 18, 0, tzinfo=UTC)


def test_an_hour_is_labelled_every_ten_minutes() -> None:
    labels = _labels(datetime(2026, 11, 23, 17, 23, tzinfo=UTC), timedelta(hours=1))
    assert labels == ["17:30", "17:40", "17:50", "18:00", "18:10"]


def test_a_month_is_labelled_on_mondays() -> None:
    labels = _labels(datetime(2026, 10, 24, 18, 0, tzinfo=UTC), timedelta(days=30))
    assert labels == ["Oct 26", "Nov 2", "Nov 9", "Nov 16"]
    assert all(datetime.strptime(f"2026 {d}", "%Y %b %d").weekday() == 0 for d in labels)


def test_an_empty_chart_has_no_labels() -> None:
    assert bar_chart([], lambda b, status: "#").x_ticks == []
    assert Bucket(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)).total == 0


def _zoned(start: datetime, span: timedelta, zone: str) -> tuple[list[str], list[str]]:
    from zoneinfo import ZoneInfo

    step = choose_step(span, hourly_only=span >= timedelta(hours=24))
    buckets = fill_buckets([], start, start + span, step)
    chart = bar_chart(buckets, lambda b, status: "#", zone=ZoneInfo(zone))
    return [t.label for t in chart.x_ticks], [b.title for b in chart.bars]


def test_a_day_in_another_zone_is_labelled_on_that_zones_clock() -> None:
    # 18:20 UTC is 19:20 in Berlin (CET, UTC+1): labels fall on Berlin's 21:00, 00:00, 03:00...
    labels, titles = _zoned(datetime(2026, 11, 22, 18, 20, tzinfo=UTC), timedelta(hours=24), "Europe/Berlin")
    assert labels == ["21:00", "00:00", "03:00", "06:00", "09:00", "12:00", "15:00", "18:00"]
    assert titles[0].startswith("2026-11-22 19:00–20:00 CET ·")


def test_a_zone_off_the_hour_still_gets_labels() -> None:
    # India is UTC+5:30: no hourly bucket starts on a round Indian hour, so labels fall on UTC's round hours
    # and read as Indian time.
    labels, titles = _zoned(datetime(2026, 11, 22, 18, 20, tzinfo=UTC), timedelta(hours=24), "Asia/Kolkata")
    assert labels[:3] == ["23:30", "02:30", "05:30"]
    assert titles[0].startswith("2026-11-22 23:30–00:30 IST ·")
