"""Latency buckets and percentiles (`latency.py`), and the rollups' histograms kept exact by the write path's
deltas, a rebuild and a search-key refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dashboard.deliveries import latency
from dashboard.deliveries.latency import BOUNDS, BUCKETS, Latencies, bucket_of, histogram_of, percentile
from dashboard.deliveries.models import HourlyRollup, PeriodRollup, StreamPeriodRollup
from dashboard.deliveries.rebuild import rebuild_derived
from tests.checks import assert_derived_exact
from tests.factories import history_record, make_source, store

DATE = datetime(2026, 3, 2, 10, 30, tzinfo=UTC)


def test_buckets_are_closed_above() -> None:
    assert [bucket_of(ms) for ms in (-5, 0, 1000, 1001, 2000, 3_599_999, 3_600_000, 3_600_001)] == [
        0, 0, 0, 1, 1, 10, 10, 11,
    ]
    assert BUCKETS == len(BOUNDS) + 1 == 12


def test_a_percentile_is_interpolated_within_its_bucket_and_stays_in_it() -> None:
    values = [1_500] * 50 + [3_000] * 45 + [45_000] * 5
    histogram = histogram_of(values)
    assert percentile(histogram, 50) == pytest.approx(2.0)  # the 50th of 50 in 1-2 s: its top
    assert 2 <= percentile(histogram, 95) <= 5  # type: ignore[operator]
    assert 30 <= percentile(histogram, 99) <= 60  # type: ignore[operator]
    assert percentile(latency.empty(), 50) is None
    assert percentile(histogram_of([9_000_000]), 99) == pytest.approx(7164)  # the open bucket ends at 2 h


def test_merged_histograms_give_the_percentiles_of_all_their_rows() -> None:
    first, second = histogram_of([1_200] * 10), histogram_of([20_000] * 10)
    merged = Latencies.of(latency.added(first, second), None)
    assert merged.unconfirmed.count == 20 and merged.confirmed.count == 0
    assert merged.unconfirmed.p50 == pytest.approx(2.0) and merged.confirmed.p50 is None
    assert 10 <= merged.unconfirmed.p95 <= 30  # type: ignore[operator]


def test_time_to_delivered_adds_the_schedule_offset_of_the_retry_that_delivered() -> None:
    assert latency.time_to_delivered_ms(2_000, 0, True) == 2_000
    assert latency.time_to_delivered_ms(2_000, 2, True) == 2_000 + 660_000
    assert latency.time_to_delivered_ms(2_000, 2, False) is None
    assert latency.time_to_delivered_ms(None, 0, True) is None


def _record(seconds_after_block: float, *, confirmed: bool = False, **fields: Any) -> dict[str, Any]:
    date = fields.pop("date", DATE)
    mined = int(date.timestamp() - seconds_after_block)
    payload = {"block": {"number": "1", "hash": "0x1", "timestamp": str(mined)}, "chainId": "0x1", "logs": []}
    return history_record(date=date, confirmed=confirmed, payload=payload, **fields)


def _hourly_histograms() -> tuple[list[int], list[int]]:
    rows = HourlyRollup.objects.values_list("latency_unconfirmed", "latency_confirmed")
    return latency.added(*(u for u, _c in rows)), latency.added(*(c for _u, c in rows))


@pytest.mark.django_db
def test_ingest_counts_each_delivery_in_its_bucket_and_moves_it_with_its_row() -> None:
    source = make_source()
    failing = _record(3, error="socket hang up", retries=1)
    moving = _record(40, confirmed=True)
    store(source, _record(1), _record(3), failing, moving, _record(700, confirmed=True), history_record(date=DATE))
    unconfirmed, confirmed = _hourly_histograms()
    assert unconfirmed == [1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert confirmed[bucket_of(40_000)] == 1 and confirmed[bucket_of(700_000)] == 1 and sum(confirmed) == 2
    assert_derived_exact()
    # The failing delivery is delivered at a retry (another status: another rollup row), the other moved an hour
    # (a date changed upstream): each leaves its old row's histogram and enters its new one.
    failing["errorMessage"], failing["tinyPayload"]["retries"] = "", 2
    moved = _record(40, confirmed=True, date=DATE + timedelta(hours=1), record_id=moving["id"])
    assert store(source, failing, moved).updated == 2
    assert _hourly_histograms() == (unconfirmed, confirmed)
    assert_derived_exact()


@pytest.mark.django_db
def test_a_rewrite_that_only_brings_the_payload_adds_the_latency() -> None:
    source = make_source()
    bare = history_record(date=DATE, confirmed=False)  # read with excludePayload
    store(source, bare)
    assert _hourly_histograms() == (latency.empty(), latency.empty())
    store(source, _record(4, record_id=bare["id"]))
    assert _hourly_histograms()[0][bucket_of(4_000)] == 1
    assert_derived_exact()


@pytest.mark.django_db
def test_the_rebuild_recomputes_the_same_histograms_in_every_table() -> None:
    source = make_source()
    store(source, *(_record(s, confirmed=s > 60, date=DATE - timedelta(hours=h))
                    for h in range(0, 40, 3) for s in (1.5, 8, 75, 400)))
    before = {
        model.__name__: sorted(model.objects.values_list("hour", "status", "latency_unconfirmed", "latency_confirmed"))
        for model in (HourlyRollup, PeriodRollup, StreamPeriodRollup)
    }
    HourlyRollup.objects.update(latency_unconfirmed=None, latency_confirmed=None)
    rebuild_derived()
    after = {
        model.__name__: sorted(model.objects.values_list("hour", "status", "latency_unconfirmed", "latency_confirmed"))
        for model in (HourlyRollup, PeriodRollup, StreamPeriodRollup)
    }
    assert after == before
    assert_derived_exact()


def linear_percentile(values: list[float], p: float) -> float:
    """The percentile interpolated between the two nearest values (numpy's and Postgres' percentile_cont)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@pytest.mark.django_db
def test_exact_percentiles_are_the_rows_own_per_confirmation_and_time_bucket() -> None:
    from dashboard.deliveries.models import Delivery

    def timed(date: datetime, seconds: float, confirmed: bool) -> dict[str, Any]:
        payload = {"block": {"number": "1", "hash": "0x1", "timestamp": str(int(date.timestamp() - seconds))},
                   "chainId": "0x1", "logs": []}
        return history_record(date=date, confirmed=confirmed, payload=payload)

    unconfirmed = [2 + (n * 7) % 13 for n in range(60)]
    confirmed = [150 + (n * 5) % 40 for n in range(30)]
    store(
        make_source(),
        *(timed(DATE + timedelta(seconds=30 * n), s, False) for n, s in enumerate(unconfirmed)),
        *(timed(DATE + timedelta(seconds=60 * n), s, True) for n, s in enumerate(confirmed)),
        history_record(date=DATE, confirmed=False),  # no payload: no latency, not counted
    )
    rows = Delivery.objects.filter(date__gte=DATE).latency_percentiles()
    assert [(row["confirmed"], row["n"]) for row in rows] == [(False, 60), (True, 30)]
    for row, values in zip(rows, (unconfirmed, confirmed), strict=True):
        assert row["p"] == pytest.approx([linear_percentile(values, p) for p in latency.PERCENTILES])
    # Per half hour: the first half hour's unconfirmed deliveries are the first 60 of every 30 s.
    by_bucket = Delivery.objects.filter(date__gte=DATE).latency_percentiles(bucket=(DATE, timedelta(minutes=30)))
    first = next(row for row in by_bucket if row["bucket"] == DATE and not row["confirmed"])
    assert first["n"] == 60
    assert first["p"][1] == pytest.approx(linear_percentile(unconfirmed, 95))
