"""A long window reads its whole six-hour periods from the period rollups and its edge hours from the hourly
rollups, and gets exactly what the hourly rollups of the whole window give; ingest keeps the period rows equal
to the sums of their hours."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import (
    Delivery,
    EventPeriodRollup,
    EventRollup,
    HourlyRollup,
    PeriodRollup,
    StreamPeriodRollup,
)
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.devtools.generator import generate_deliveries
from tests.checks import assert_derived_exact
from tests.deliveries.test_ingest import T0, make_source_row, record

pytestmark = pytest.mark.django_db(transaction=True)

NEWEST = datetime(2026, 3, 9, 13, 47, tzinfo=UTC)
EPOCH = datetime(2000, 1, 3, tzinfo=UTC)


def hourly(start: datetime, end: datetime) -> RollupWindow:
    return RollupWindow((HourlyRollup.objects.between(HourlyRollup.hour_of(start), end),))


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (NEWEST - timedelta(days=7, minutes=17), NEWEST),  # edges inside a period at both ends
        (datetime(2026, 3, 3, 6, tzinfo=UTC), datetime(2026, 3, 8, 18, tzinfo=UTC)),  # aligned edges
        (NEWEST - timedelta(days=6, hours=5, minutes=3), NEWEST - timedelta(hours=29, minutes=40)),
    ],
)
def test_a_split_window_reads_what_the_hourly_rollups_give(start: datetime, end: datetime) -> None:
    generate_deliveries(3000, days=8, newest=NEWEST, failure_rate=0.2, analyze=False)
    split = RollupWindow.between(start, end)
    assert any(part.model is PeriodRollup for part in split.parts)
    exact = hourly(start, end)

    fields = ("error_group_id", "stream_id", "tag")
    split_rows, exact_rows = split.by_dimensions(*fields), exact.by_dimensions(*fields)
    assert [(*(r[f] for f in fields), r["total"], r["failed"], r["retried"]) for r in split_rows] == [
        (*(r[f] for f in fields), r["total"], r["failed"], r["retried"]) for r in exact_rows
    ]
    # A period row's `last_hour` is the period's first hour.
    for got, want in zip(split_rows, exact_rows, strict=True):
        assert timedelta(0) <= want["last_hour"] - got["last_hour"] < timedelta(hours=6)
    assert split.retry_distribution("stream_id", "tag") == exact.retry_distribution("stream_id", "tag")
    assert split.slice(status="failing").retry_distribution("tag") == exact.slice(status="failing").retry_distribution(
        "tag"
    )
    # The failures per group, counted where and when in one grouping-sets query, are the stored deliveries of
    # each group in the window's hours (the hours from the one holding `start` to the one holding `end`, both
    # whole), whichever way they are summed.
    after_last_hour = HourlyRollup.hour_of(end - timedelta(microseconds=1)) + timedelta(hours=1)
    stored = Counter(
        Delivery.objects.exclude(error_group=None)
        .filter(date__gte=HourlyRollup.hour_of(start), date__lt=after_last_hour)
        .values_list("error_group_id", flat=True)
    )
    assert len(stored) > 1
    for step in (timedelta(hours=6), timedelta(hours=12), timedelta(days=1)):
        stepped = RollupWindow.between(start, end, step=step)
        assert stepped.bucketed(EPOCH, step) == exact.bucketed(EPOCH, step)
        failures = stepped.failures_by_group(EPOCH, step)
        assert failures == exact.failures_by_group(EPOCH, step)
        for rows in (failures.where, failures.when):
            per_group: Counter[int] = Counter()
            for row in rows:
                per_group[row["error_group_id"]] += row["n"]
            assert per_group == stored
        assert all(row["bucket"] == EPOCH + (row["bucket"] - EPOCH) // step * step for row in failures.when)


def test_a_window_of_one_event_reads_its_periods_and_gets_what_its_hours_give() -> None:
    generate_deliveries(3000, days=8, newest=NEWEST, failure_rate=0.2, analyze=False)
    start, end = NEWEST - timedelta(days=7, minutes=17), NEWEST
    split = RollupWindow.between(start, end, event="transfer")
    assert [part.model for part in split.parts] == [EventRollup, EventPeriodRollup]
    exact = RollupWindow((EventRollup.objects.for_event("transfer").between(HourlyRollup.hour_of(start), end),))
    fields = ("error_group_id", "stream_id")
    assert [(r["error_group_id"], r["stream_id"], r["total"], r["failed"]) for r in split.by_dimensions(*fields)] == [
        (r["error_group_id"], r["stream_id"], r["total"], r["failed"]) for r in exact.by_dimensions(*fields)
    ]
    holding = Delivery.objects.filter(
        date__gte=HourlyRollup.hour_of(start), date__lt=end, search_keys__contains=["event:transfer"]
    )
    assert sum(r["total"] for r in split.by_dimensions("stream_id")) == holding.count() > 2000
    for step in (timedelta(hours=6), timedelta(days=1)):
        stepped = RollupWindow.between(start, end, step=step, event="transfer")
        assert stepped.bucketed(EPOCH, step) == exact.bucketed(EPOCH, step)
        assert stepped.failures_by_group(EPOCH, step) == exact.failures_by_group(EPOCH, step)
    assert not RollupWindow.between(start, end, event="approval").bucketed(EPOCH, timedelta(days=1))
    assert_derived_exact()


def test_a_step_that_splits_a_period_or_a_short_window_reads_the_hourly_rollups_alone() -> None:
    three_hours = RollupWindow.between(NEWEST - timedelta(days=7), NEWEST, step=timedelta(hours=3))
    assert [part.model for part in three_hours.parts] == [HourlyRollup]
    day = RollupWindow.between(NEWEST - timedelta(hours=24), NEWEST)
    assert [part.model for part in day.parts] == [HourlyRollup]


def test_a_long_window_reads_a_fraction_of_the_rows() -> None:
    generate_deliveries(6000, days=30, newest=NEWEST, analyze=False)
    start = NEWEST - timedelta(days=30)
    split = RollupWindow.between(start, NEWEST)
    read = sum(part.count() for part in split.parts)
    assert read * 2 < HourlyRollup.objects.between(HourlyRollup.hour_of(start), NEWEST).count()


def test_ingest_keeps_the_periods_equal_to_their_hours() -> None:
    source = make_source_row()
    # Records across a period boundary, then moved between hours and periods by later polls.
    period_end = PeriodRollup.period_of(T0) + timedelta(hours=6)
    minutes = int((period_end - T0).total_seconds() // 60)
    store_records(source, [record(i, minutes=minutes - 30 + 20 * i, error="timeout" if i % 2 else "")
                           for i in range(1, 5)])
    assert PeriodRollup.objects.count() >= 2
    assert_derived_exact()
    store_records(source, [record(1, minutes=minutes + 400, error=""), record(4, minutes=5, error="boom", retries=2)])
    assert_derived_exact()


def test_a_split_window_sums_the_recent_hours_apart() -> None:
    generate_deliveries(3000, days=8, newest=NEWEST, failure_rate=0.2, analyze=False)
    start, day_ago = NEWEST - timedelta(days=7), HourlyRollup.hour_of(NEWEST - timedelta(hours=24))
    split = RollupWindow.between(start, NEWEST, split_at=day_ago)
    assert any(part.model is PeriodRollup for part in split.parts)
    fields = ("stream_id", "tag", "webhook_url")
    sums = ("total", "failed", "retried", "total_recent", "failed_recent", "retried_recent")

    got = [tuple(r[f] for f in (*fields, *sums)) for r in split.by_dimensions(*fields)]
    want = [
        tuple(r[f] for f in (*fields, *sums))
        for r in HourlyRollup.objects.between(HourlyRollup.hour_of(start), NEWEST).by_dimensions(*fields, split_at=day_ago)
    ]
    assert got == want
    assert any(row[-3] for row in got) and any(row[3] > row[-3] for row in got)


def test_a_window_read_per_stream_gets_what_the_hourly_rollups_give_from_fewer_rows() -> None:
    generate_deliveries(4000, days=8, newest=NEWEST, failure_rate=0.3, analyze=False)
    start, day_ago = NEWEST - timedelta(days=7, minutes=17), HourlyRollup.hour_of(NEWEST - timedelta(hours=24))
    per_stream = RollupWindow.between(start, NEWEST, split_at=day_ago, per_stream=True)
    assert [part.model for part in per_stream.parts] == [HourlyRollup, StreamPeriodRollup]
    fields = ("stream_id", "tag", "webhook_url", "chain_id")
    sums = ("total", "failed", "retried", "total_recent", "failed_recent", "retried_recent")
    got = [tuple(r[f] for f in (*fields, *sums)) for r in per_stream.by_dimensions(*fields)]
    exact = HourlyRollup.objects.between(HourlyRollup.hour_of(start), NEWEST)
    want = [tuple(r[f] for f in (*fields, *sums)) for r in exact.by_dimensions(*fields, split_at=day_ago)]
    assert got == want
    assert sum(row[len(fields) + 2] for row in got) > 0, "the generated deliveries were retried"

    for stream_id in {row[0] for row in got}:
        whole = HourlyRollup.objects.filter(stream_id=stream_id).attempt_counts()
        assert StreamPeriodRollup.objects.filter(stream_id=stream_id).attempt_counts() == whole
        assert whole["attempts"] > whole["stored"] > whole["delivered"] > 0

    # The same periods from a fraction of the rows (the hourly edges are the same rows).
    periods = RollupWindow.between(start, NEWEST, split_at=day_ago).parts[1]
    assert periods.model is PeriodRollup
    assert per_stream.parts[1].count() * 2 < periods.count()
    for step in (timedelta(hours=6), timedelta(days=1)):
        stepped = RollupWindow.between(start, NEWEST, step=step, per_stream=True)
        assert stepped.bucketed(EPOCH, step) == hourly(start, NEWEST).bucketed(EPOCH, step)
        one = {"stream_id": got[0][0], "status": "failing"}
        assert stepped.slice(**one).bucketed(EPOCH, step) == hourly(start, NEWEST).slice(**one).bucketed(EPOCH, step)


def test_ingest_keeps_the_stream_periods_equal_to_the_periods() -> None:
    source = make_source_row()
    period_end = PeriodRollup.period_of(T0) + timedelta(hours=6)
    minutes = int((period_end - T0).total_seconds() // 60)
    store_records(source, [record(i, minutes=minutes - 30 + 20 * i, error="timeout" if i % 2 else "", retries=i % 3)
                           for i in range(1, 7)])
    assert StreamPeriodRollup.objects.count() >= 2
    assert_derived_exact()
    # A retry that changes nothing but the retry count, one that succeeds, and a record moved to another period.
    store_records(source, [record(1, minutes=minutes - 10, error="timeout", retries=2),
                           record(3, minutes=minutes + 30, error="", retries=1),
                           record(2, minutes=minutes + 400, error="")])
    assert_derived_exact()
    assert StreamPeriodRollup.objects.filter(retries_sum__gt=0).exists()
