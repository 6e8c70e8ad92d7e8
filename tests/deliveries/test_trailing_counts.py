"""Trailing-window counts from whole-hour rollups plus raw edge hours equal counting the raw rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.trailing_counts import trailing_counts
from tests.factories import history_record, make_source

pytestmark = pytest.mark.django_db

US = timedelta(microseconds=1)


def _raw(now: datetime, hours: int) -> dict[str, int]:
    return Delivery.objects.filter(date__gte=now - timedelta(hours=hours), date__lte=now).counts()


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 3, 2, 12, 34, 56, 789000, tzinfo=UTC),  # mid-hour
        datetime(2026, 3, 2, 12, 0, tzinfo=UTC),  # on the hour: the edges are empty
        datetime(2026, 3, 2, 12, 0, 0, 1, tzinfo=UTC),  # just past it
    ],
)
def test_it_counts_exactly_what_the_raw_rows_of_each_window_hold(now: datetime) -> None:
    source = make_source("trailing")
    current = now.replace(minute=0, second=0, microsecond=0)
    # Rows on and beside every boundary a window or an hour has, failing and not, and some outside.
    moments = []
    for h in (1, 24):
        since = now - timedelta(hours=h)
        first_whole = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        moments += [since - US, since, since + US, first_whole - US, first_whole, first_whole + US]
    moments += [current - US, current, current + US, now - US, now, now + US, now + timedelta(minutes=10)]
    moments += [now - timedelta(hours=h, minutes=m) for h in range(0, 26) for m in (7, 41)]
    records = [
        history_record(date=moment, error="socket hang up" if i % 3 == 0 else "", retries=i % 3)
        for i, moment in enumerate(moments)
    ]
    from dashboard.deliveries.ingest import store_records

    assert not store_records(source, records).rejected

    counts = trailing_counts(now, (1, 24))

    for h in (1, 24):
        raw = _raw(now, h)
        assert (counts[f"total_{h}"], counts[f"failed_{h}"]) == (raw["total"], raw["failed"]), h
    assert counts["total_24"] > counts["total_1"] > 0 and counts["failed_24"] > 0


def test_an_empty_table_counts_zero() -> None:
    now = datetime(2026, 3, 2, 12, 34, tzinfo=UTC)
    assert trailing_counts(now, (1, 24)) == {"total_1": 0, "failed_1": 0, "total_24": 0, "failed_24": 0}


def test_raw_rows_are_read_for_the_edge_hours_only() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    now = datetime(2026, 3, 2, 12, 34, tzinfo=UTC)
    with CaptureQueriesContext(connection) as captured:
        trailing_counts(now, (1, 24))
    raw = [q["sql"] for q in captured.captured_queries if "deliveries_delivery" in q["sql"]]
    assert len(raw) == 1
    # The 24-hour window reads raw rows from 11:34 (one hour before now) and 12:34 yesterday to 13:00,
    # never the 22 whole hours between.
    assert "2026-03-01 12:34:00" in raw[0] and "2026-03-01 13:00:00" in raw[0]
    assert "2026-03-02 11:34:00" in raw[0] and "2026-03-02 12:00:00" in raw[0]
