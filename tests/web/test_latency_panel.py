"""Where the slowest deliveries' links begin (`latency_panel.slowest_from`): at the p95, unless the p95 read lies in
the slowest non-empty bucket, whose deliveries may all lie below it; then at that bucket's lower bound."""

from __future__ import annotations

from dashboard.deliveries.latency import bucket_of, histogram_of, percentile
from dashboard.web.latency_panel import min_latency, slowest_from


def test_a_spike_in_a_wide_bucket_is_listed_whole() -> None:
    # Sixty deliveries of 1-5 s and six late ones of 305-350 s: the p95 read (in the 300-600 s bucket, 435 s) is
    # above every one of them.
    late = [305_000, 310_000, 320_000, 330_000, 340_000, 350_000]
    latencies = [1000 + 60 * i for i in range(60)] + late
    histogram = histogram_of(latencies)
    p95 = percentile(histogram, 95)
    assert p95 is not None and p95 * 1000 > max(latencies)
    threshold = slowest_from(histogram)
    assert threshold == 300
    assert [ms for ms in latencies if ms >= float(min_latency(threshold)) * 1000] == late


def test_confirmed_deliveries_waiting_for_the_same_finality_are_listed_not_none() -> None:
    # Ethereum's confirmed deliveries: 145-149 s, all in the 120-300 s bucket, whose p95 reads 291 s.
    latencies = [145_000 + 40 * i for i in range(100)]
    histogram = histogram_of(latencies)
    assert {bucket_of(ms) for ms in latencies} == {7} and round(percentile(histogram, 95) or 0) == 291
    assert slowest_from(histogram) == 120


def test_a_p95_below_the_slowest_bucket_is_the_links_start() -> None:
    latencies = [1000 + 30 * i for i in range(100)] + [700_000]
    histogram = histogram_of(latencies)
    assert slowest_from(histogram) == percentile(histogram, 95)
    assert slowest_from(histogram_of([])) is None
