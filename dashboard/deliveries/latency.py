"""A delivery's latency, its fixed histogram buckets and the percentiles read from them: the one home of every
latency figure the pages, the alert condition, the metrics and the API show.

Processing latency (contract §5) is a delivery's `date` (its first attempt) minus its block's timestamp
(`payload.block.timestamp`, Unix seconds), stored as `Delivery.latency_ms` beside `block_time`; a confirmed
delivery's includes the wait for finality. A delivery whose record came without its payload (`excludePayload`)
or a test webhook (no block) has none. The rollups count deliveries per bucket of it (`latency_unconfirmed`,
`latency_confirmed`: one integer per bucket), so any window's percentiles are the sums of its rollup rows'
arrays, never a read of raw rows; a percentile is interpolated within the bucket holding it, so its error is at
most that bucket's width (below 1 s under 2 s, a fifth to a half of the value above).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dashboard.deliveries.schedule import ATTEMPT_OFFSETS

# Upper bounds of the buckets, in seconds; the last bucket holds everything above the last bound. Log-spaced
# (1-2-5 and the minute and hour marks) so the relative error of a percentile stays about the same from a
# second to an hour; the first bounds are fine enough for unconfirmed deliveries (seconds after the block), the
# later ones span the chains' finality (1–15 min) and late retries.
BOUNDS: tuple[float, ...] = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
BUCKETS = len(BOUNDS) + 1
BOUNDS_MS: tuple[int, ...] = tuple(int(b * 1000) for b in BOUNDS)
# Where the interpolation of the open last bucket ends: twice its lower bound.
LAST_BUCKET_END = 2 * BOUNDS[-1]
PERCENTILES = (50, 95, 99)
# A latency panel's slice holding at most this many deliveries with a latency reads its percentiles exactly from the
# rows (`DeliveryQuerySet.latency_percentiles`: a bitmap scan, sort and group, ~10 ms for 5,000 rows; 13,000 took
# 33-57 ms at 10 M under load), more from the histograms (within a bucket).
EXACT_UP_TO = 5_000
# A latency beyond this (the clock or the block timestamp wrong by more than a month) is not stored.
MAX_LATENCY_MS = 2**31 - 1


def latency_ms(date: datetime, block_time: datetime | None) -> int | None:
    """`date` − `block_time` in whole milliseconds; None without a block time or out of the column's range.
    A negative latency (the provider's clock behind the chain's) is kept: it is what the record says."""
    if block_time is None:
        return None
    # Floored, as the SQL of `latency_fill` computes it.
    millis = (date - block_time) // timedelta(milliseconds=1)
    return millis if -MAX_LATENCY_MS <= millis <= MAX_LATENCY_MS else None


def bucket_of(millis: int) -> int:
    """The bucket (0-based) of a latency in milliseconds; a negative one counts in the first."""
    return bisect.bisect_left(BOUNDS_MS, millis)


def empty() -> list[int]:
    return [0] * BUCKETS


def added(*histograms: Sequence[int] | None) -> list[int]:
    """Histograms summed bucket by bucket; None (a rollup row from before latencies were kept) counts nothing."""
    total = empty()
    for histogram in histograms:
        if histogram:
            for i, n in enumerate(histogram[:BUCKETS]):
                total[i] += n or 0
    return total


def percentile(histogram: Sequence[int], p: float) -> float | None:
    """The p-th percentile (0–100) in seconds, interpolated linearly within the bucket that holds it; None for an
    empty histogram. The true value lies in the same bucket, so the error is below the bucket's width."""
    total = sum(histogram)
    if total <= 0:
        return None
    rank = p / 100 * total
    seen = 0
    for i, n in enumerate(histogram):
        if n and seen + n >= rank:
            low = 0.0 if i == 0 else float(BOUNDS[i - 1])
            high = float(BOUNDS[i]) if i < len(BOUNDS) else LAST_BUCKET_END
            return low + (high - low) * max(0.0, rank - seen) / n
        seen += n
    return float(BOUNDS[-1])


def count_within(histogram: Sequence[int], seconds: float) -> float:
    """How many of the histogram's deliveries took at most `seconds`: the buckets below it whole, the bucket holding
    it by the share of its width below (as `percentile` interpolates); exact when `seconds` is a bound."""
    within = 0.0
    low = 0.0
    for i, n in enumerate(histogram[:BUCKETS]):
        high = float(BOUNDS[i]) if i < len(BOUNDS) else LAST_BUCKET_END
        if seconds >= high:
            within += n
        elif seconds > low:
            within += n * (seconds - low) / (high - low)
        low = high
    return within


@dataclass(frozen=True)
class Percentiles:
    """p50, p95 and p99 in seconds (None: no delivery with a latency) of `count` deliveries."""

    count: int
    p50: float | None
    p95: float | None
    p99: float | None

    @classmethod
    def of(cls, histogram: Sequence[int]) -> Percentiles:
        return cls(sum(histogram), *(percentile(histogram, p) for p in PERCENTILES))


@dataclass(frozen=True)
class Latencies:
    """The percentiles of a slice's unconfirmed and confirmed deliveries, and their histograms."""

    unconfirmed: Percentiles
    confirmed: Percentiles
    unconfirmed_buckets: tuple[int, ...]
    confirmed_buckets: tuple[int, ...]

    @classmethod
    def of(cls, unconfirmed: Sequence[int] | None, confirmed: Sequence[int] | None) -> Latencies:
        u, c = added(unconfirmed), added(confirmed)
        return cls(Percentiles.of(u), Percentiles.of(c), tuple(u), tuple(c))


def histogram_of(latencies_ms: Iterable[int | None]) -> list[int]:
    """The histogram of raw latencies (the edge of an alert's window read from rows, the tests)."""
    counts = empty()
    for millis in latencies_ms:
        if millis is not None:
            counts[bucket_of(millis)] += 1
    return counts


def time_to_delivered_ms(latency: int | None, retries: int, delivered: bool) -> int | None:
    """Time from the block to the attempt that delivered, from what is stored: the first attempt's latency plus
    the published schedule's offset of the retry that succeeded (a delivery stored delivered after `retries`
    retries succeeded on its last). None while it is not delivered or without a latency. Where the delivery page
    knows the exact attempt (the provider's logs, a replay's answer), it says that moment instead."""
    if latency is None or not delivered:
        return None
    offset = ATTEMPT_OFFSETS[min(max(retries, 0), len(ATTEMPT_OFFSETS) - 1)]
    return latency + int(offset * 1000)


def bucket_sql(column: str) -> str:
    """SQL giving the 1-based bucket of a latency column (for the rollups' arrays): the first bound it does not
    exceed, as `bucket_of` counts."""
    cases = " ".join(f"WHEN {column} <= {bound} THEN {i + 1}" for i, bound in enumerate(BOUNDS_MS))
    return f"CASE {cases} ELSE {BUCKETS} END"


HISTOGRAMS: tuple[str, ...] = ("unconfirmed", "confirmed")


def from_sums(row: dict[str, Any]) -> Latencies:
    """The latencies of a row of `SliceCountsQuerySet.latency_sums` (or of several merged)."""
    return Latencies.of(row["unconfirmed"], row.get("confirmed"))
