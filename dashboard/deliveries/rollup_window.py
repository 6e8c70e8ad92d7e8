"""Counts over a window of hours from the fewest rollup rows that give them exactly: the whole six-hour periods
inside the window from the period rollups, the hours before the first and after the last whole period from
the hourly rollups (for one decoded event: the event period and event rollups; for a read that needs neither
the error-group nor the retry dimension: the stream period rollups). A 30-day window reads ~120 periods
instead of ~720 hours, whatever the daily rate.

Each read is two queries, one per table (the hourly edges are one query), and the two's rows are added together, so the result is what the hourly
rollups of the whole window give (ingest keeps the period rows equal to the sums of their hours)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from dashboard.deliveries.latency import HISTOGRAMS, Latencies, from_sums
from dashboard.deliveries.models import (
    ROLLUP_PERIOD,
    EventPeriodRollup,
    EventRollup,
    FailuresByGroup,
    HourlyRollup,
    PeriodRollup,
    RollupQuerySet,
    SliceCountsQuerySet,
    StreamPeriodRollup,
)

# A window reads the period rollups only when it holds at least this many whole periods; shorter ones read
# few hourly rows anyway, in one query.
MIN_PERIODS = 4


@dataclass(frozen=True)
class RollupWindow:
    parts: tuple[SliceCountsQuerySet, ...]
    # `by_dimensions` also sums the hours from this one on (suffix `_recent`).
    split_at: datetime | None = None

    @classmethod
    def between(
        cls, start: datetime, end: datetime | None, *, step: timedelta | None = None, split_at: datetime | None = None,
        event: str = "", per_stream: bool = False,
    ) -> RollupWindow:
        """The rollups of the hours from the one holding `start` to `end` (None: no end). With `step`, the
        rows are to be bucketed that wide from midnight UTC, so periods are read only if it is a multiple of
        ROLLUP_PERIOD. With `split_at` (an hour), periods are read only before it, so that `by_dimensions`
        can sum the hours from it on apart. With `event`, only the deliveries holding that decoded event: the
        event and event period rollups, read the same way. With `per_stream`, whole periods come from the
        stream period rollups: the window is then neither sliced nor read by error group or retry count."""
        first_hour = HourlyRollup.hour_of(start)
        hourly: RollupQuerySet = HourlyRollup.objects.all()
        periods: SliceCountsQuerySet = (StreamPeriodRollup if per_stream else PeriodRollup).objects.all()
        if event:
            hourly = EventRollup.objects.for_event(event)
            periods = EventPeriodRollup.objects.for_event(event)
        inner_start = PeriodRollup.period_of(first_hour)
        if inner_start < first_hour:
            inner_start += ROLLUP_PERIOD
        inner_end = PeriodRollup.period_of(end or timezone.now())
        if split_at is not None:
            inner_end = min(inner_end, PeriodRollup.period_of(split_at))
        coarse = step is None or not step % ROLLUP_PERIOD
        if not coarse or inner_end - inner_start < MIN_PERIODS * ROLLUP_PERIOD:
            return cls((hourly.between(first_hour, end),), split_at)
        tail = Q(hour__gte=inner_end) if end is None else Q(hour__gte=inner_end, hour__lt=end)
        edges = hourly.filter(Q(hour__gte=first_hour, hour__lt=inner_start) | tail)
        return cls((edges, periods.between(inner_start, inner_end)), split_at)

    def slice(self, **kwargs: Any) -> RollupWindow:
        return RollupWindow(tuple(part.slice(**kwargs) for part in self.parts), self.split_at)

    def exclude(self, **kwargs: Any) -> RollupWindow:
        return RollupWindow(tuple(part.exclude(**kwargs) for part in self.parts), self.split_at)

    def bucketed(self, origin: datetime, step: timedelta) -> list[dict[str, Any]]:
        return merged((part.bucketed(origin, step) for part in self.parts), ("bucket",), ("delivered", "failed"))

    def by_dimensions(self, *fields: str) -> list[dict[str, Any]]:
        """As `RollupQuerySet.by_dimensions`, split at `split_at`; `last_hour` of a period is its first hour."""
        sums: tuple[str, ...] = ("total", "failed", "retried")
        if self.split_at is not None:
            sums += ("total_recent", "failed_recent", "retried_recent")
        return merged(
            (part.by_dimensions(*fields, split_at=self.split_at) for part in self.parts), fields, sums,
            maxima=("last_hour",),
        )

    def latencies(self, *fields: str, confirmed: bool = True) -> dict[tuple[Any, ...], Latencies]:
        """The window's latency percentiles per group of `fields` (one entry, key (), without fields); without
        `confirmed`, of the unconfirmed deliveries alone (the confirmed ones count none)."""
        names = HISTOGRAMS if confirmed else HISTOGRAMS[:1]
        rows = merged((part.latency_sums(*fields, confirmed=confirmed) for part in self.parts), fields, (),
                      histograms=names)
        return {tuple(row[f] for f in fields): from_sums(row) for row in rows}

    def latency_bucketed(
        self, origin: datetime, step: timedelta, *fields: str
    ) -> list[tuple[datetime, tuple[Any, ...], Latencies]]:
        """The latency percentiles per time bucket of `step` from `origin` and group of `fields` (key () without
        fields), in time order: one grouped read gives a slice's latency over time and per dimension."""
        return [
            (bucket, key, Latencies.of(unconfirmed, confirmed))
            for bucket, key, unconfirmed, confirmed in self.latency_histograms(origin, step, *fields)
        ]

    def latency_histograms(
        self, origin: datetime, step: timedelta, *fields: str
    ) -> list[tuple[datetime, tuple[Any, ...], list[int], list[int]]]:
        """As `latency_bucketed`, the unconfirmed and confirmed histograms themselves: a caller that merges the
        groups again (over time, per dimension) reads percentiles only of what it shows."""
        rows = merged(
            (part.latency_sums(*fields, bucket=(origin, step)) for part in self.parts), ("bucket", *fields), (),
            histograms=HISTOGRAMS,
        )
        return [(row["bucket"], tuple(row[f] for f in fields), row["unconfirmed"], row["confirmed"]) for row in rows]

    def failures_by_group(self, origin: datetime, step: timedelta) -> FailuresByGroup:
        """As `RollupQuerySet.failures_by_group`, each grouping ordered by its keys."""
        parts = [_every_dimension(part).failures_by_group(origin, step) for part in self.parts]
        return FailuresByGroup(
            where=merged((p.where for p in parts), ("error_group_id", "stream_id", "tag", "webhook_url"), ("n",)),
            when=merged((p.when for p in parts), ("error_group_id", "bucket"), ("n",)),
        )

    def objective_counts(self, *fields: str) -> list[dict[str, Any]]:
        """As `RollupQuerySet.objective_counts`."""
        return merged((_every_dimension(part).objective_counts(*fields) for part in self.parts), fields,
                      ("total", "failed", "not_first"))

    def retry_distribution(self, *dimensions: str) -> list[dict[str, Any]]:
        return merged((_every_dimension(part).retry_distribution(*dimensions) for part in self.parts),
                      (*dimensions, "status", "retries"), ("n",))


def _every_dimension(part: SliceCountsQuerySet) -> RollupQuerySet:
    if not isinstance(part, RollupQuerySet):
        raise TypeError("a window read per stream has no error-group or retry-count dimension")
    return part


def merged(
    parts: Iterable[list[dict[str, Any]]], keys: Sequence[str], sums: Sequence[str], *, maxima: Sequence[str] = (),
    histograms: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Rows of several parts with equal `keys` made one: `sums` added, `histograms` (lists of counts) added
    element by element, `maxima` the largest; ordered by `keys`."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rows in parts:
        for row in rows:
            key = tuple(row[name] for name in keys)
            into = by_key.get(key)
            if into is None:
                by_key[key] = dict(row)
                continue
            for name in sums:
                into[name] += row[name]
            for name in histograms:
                into[name] = [a + b for a, b in zip(into[name], row[name], strict=True)]
            for name in maxima:
                if row[name] is not None and (into[name] is None or row[name] > into[name]):
                    into[name] = row[name]
    return [by_key[key] for key in sorted(by_key, key=lambda k: tuple((v is None, v) for v in k))]
