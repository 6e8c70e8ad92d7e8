"""Service level objectives: what share of a stream's deliveries must be good, how much of the allowed bad share
(the error budget) its last SLO_WINDOW_DAYS days have spent, and how fast it is being spent now (the burn rate).

Two objectives per stream, the settings' (`SLO_*`) unless the stream has its own (`StreamObjective`):
- **delivery**: the share of deliveries delivered — on the first attempt (`first_attempt`: not delivered, or
  delivered after a retry, is bad), or at all (`eventually`: a delivery not delivered is bad, one still retrying
  too until it is delivered, so the budget spent never lags behind a receiver that is down);
- **latency**: the share of unconfirmed deliveries whose processing latency (first attempt − block time) is at most
  the objective's seconds, read from the latency histograms (`latency.count_within`).

The budget of a window is (1 − target) × its deliveries; what is left is 1 − bad / budget (below 0: overspent).
It is counted over the whole hours of the last SLO_WINDOW_DAYS days from the rollups (six-hour periods and their
edge hours), leaving out the hours a maintenance window covered for the stream; cached for a minute.

The burn rate of a window is its bad share divided by the allowed one: 1 spends the budget exactly over the
objective's days, 14.4 spends 2 % of a 30-day budget in an hour. The burn-rate conditions (`BURNS`) hold for a
stream when both of a pair of windows ending now burn at least at the factor, on the delivery or the latency
objective: the long window says the spending is significant, the short one that it is still going on (so the
alert resolves soon after it stops). The windows are exact: whole hours from the hourly rollups, the partial hours
from the raw rows (`trailing_counts.trailing_stream_counts`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache

from dashboard.deliveries.latency import count_within
from dashboard.deliveries.models import HourlyRollup, Stream
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.deliveries.trailing_counts import StreamCounts, trailing_stream_counts
from dashboard.expectations.maintenance import Target, intervals
from dashboard.expectations.models import DeliveryObjective, MaintenanceWindow, StreamObjective
from dashboard.visibility import EVERYTHING, current, viewing

HOUR = timedelta(hours=1)
CACHE_SECONDS = 60


@dataclass(frozen=True)
class Burn:
    """A multi-window burn-rate condition: both windows ending now at `factor` times the budget rate or more."""

    name: str
    long: timedelta
    short: timedelta
    factor: float

    def describe(self) -> str:
        return f"{_duration(self.long)} and {_duration(self.short)} at {self.factor:g}×"

    @property
    def windows(self) -> str:
        return f"{_duration(self.long)} / {_duration(self.short)}"


FAST = Burn("fast", timedelta(hours=1), timedelta(minutes=5), 14.4)
SLOW = Burn("slow", timedelta(hours=6), timedelta(minutes=30), 6.0)
BURNS = {"fast": FAST, "slow": SLOW}


def _duration(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


@dataclass(frozen=True)
class Objective:
    """A stream's two objectives; `own`: set for the stream, not the settings' defaults."""

    delivery: str
    delivery_target: float
    latency_seconds: int
    latency_target: float
    own: bool = False

    @classmethod
    def default(cls) -> Objective:
        return cls(settings.SLO_DELIVERY, settings.SLO_DELIVERY_TARGET, settings.SLO_LATENCY_SECONDS,
                   settings.SLO_LATENCY_TARGET)

    @classmethod
    def of(cls, row: StreamObjective | None) -> Objective:
        base = cls.default()
        if row is None:
            return base
        return cls(
            row.delivery or base.delivery,
            float(row.delivery_target) if row.delivery_target is not None else base.delivery_target,
            row.latency_seconds or base.latency_seconds,
            float(row.latency_target) if row.latency_target is not None else base.latency_target,
            own=True,
        )

    def describe_delivery(self) -> str:
        how = "on the first attempt" if self.delivery == DeliveryObjective.FIRST_ATTEMPT else "eventually"
        return f"{self.delivery_target:g} % delivered {how}"

    def describe_latency(self) -> str:
        return f"{self.latency_target:g} % of unconfirmed deliveries within {self.latency_seconds} s of their block"

    def measures(self, counts: StreamCounts) -> tuple[Measure, Measure]:
        """The delivery and latency measures of a window's counts."""
        bad = counts.not_first if self.delivery == DeliveryObjective.FIRST_ATTEMPT else counts.failed
        timed = sum(counts.latency)
        return (
            Measure(self.delivery_target, counts.total, bad),
            Measure(self.latency_target, timed, timed - count_within(counts.latency, self.latency_seconds)),
        )


def objectives(stream_ids: Iterable[str]) -> dict[str, Objective]:
    """Each stream's objectives: its own where it has them, else the settings'."""
    ids = list(stream_ids)
    own = {row.stream_id: row for row in StreamObjective.objects.filter(stream_id__in=ids)}
    return {stream_id: Objective.of(own.get(stream_id)) for stream_id in ids}


@dataclass(frozen=True)
class Measure:
    """One objective over one window: `total` events, `bad` of them (the latency's is interpolated, so a float)."""

    target: float
    total: float
    bad: float

    @property
    def allowed(self) -> float:
        """The share of events that may be bad (0.001 for 99.9 %)."""
        return 1 - self.target / 100

    @property
    def good_percent(self) -> float | None:
        return None if not self.total else 100 * (self.total - self.bad) / self.total

    @property
    def budget_left(self) -> float | None:
        """The share of the window's error budget not spent (negative: overspent); None without events."""
        if not self.total:
            return None
        return 1 - self.bad / (self.allowed * self.total)

    @property
    def burn_rate(self) -> float | None:
        """The bad share over the allowed one; None without events."""
        return None if not self.total else (self.bad / self.total) / self.allowed


@dataclass(frozen=True)
class Budget:
    """A stream's objectives and their measures over [since, until), `left_out` hours of maintenance not counted."""

    stream_id: str
    objective: Objective
    delivery: Measure
    latency: Measure
    since: datetime
    until: datetime
    left_out: int = 0

    @property
    def least_left(self) -> float | None:
        """The smaller of the two budgets left (the Streams page's column)."""
        left = [m.budget_left for m in (self.delivery, self.latency) if m.budget_left is not None]
        return min(left) if left else None


def budgets(now: datetime, stream_ids: Iterable[str] | None = None) -> dict[str, Budget]:
    """Every stream's budget over the last SLO_WINDOW_DAYS days of whole hours (or these streams')."""
    until = HourlyRollup.hour_of(now)
    since = until - timedelta(days=settings.SLO_WINDOW_DAYS)
    key = f"slo-counts:{until:%Y%m%d%H}:{settings.SLO_WINDOW_DAYS}"
    counted: tuple[dict[str, StreamCounts], dict[str, int]] | None = cache.get(key)
    if counted is None:
        # Counted for every stream and cached for all; each viewer is given only the streams they see.
        with viewing(EVERYTHING):
            counted = _window_counts(since, until)
        cache.set(key, counted, CACHE_SECONDS)
    counts, left_out = counted
    seen = current()
    ids = [s for s in (list(counts) if stream_ids is None else stream_ids) if s in counts and seen.allows(s)]
    found: dict[str, Budget] = {}
    for stream_id, objective in objectives(ids).items():
        delivery, latency = objective.measures(counts[stream_id])
        found[stream_id] = Budget(stream_id, objective, delivery, latency, since, until, left_out.get(stream_id, 0))
    return found


def _window_counts(since: datetime, until: datetime) -> tuple[dict[str, StreamCounts], dict[str, int]]:
    """Per stream, its counts over [since, until) less its maintenance hours, and how many hours those were."""
    window = RollupWindow.between(since, until)
    counts: dict[str, StreamCounts] = {
        row["stream_id"]: StreamCounts(row["total"], row["failed"], row["not_first"])
        for row in window.objective_counts("stream_id")
    }
    per_stream = RollupWindow.between(since, until, per_stream=True)
    for (stream_id,), latencies in per_stream.latencies("stream_id", confirmed=False).items():
        counts.setdefault(stream_id, StreamCounts()).latency = list(latencies.unconfirmed_buckets)
    return counts, _leave_out_maintenance(counts, since, until)


def _leave_out_maintenance(counts: dict[str, StreamCounts], since: datetime, until: datetime) -> dict[str, int]:
    """Take the hours a maintenance window covered for each stream (an hour it touched at all) out of its counts;
    return how many hours that was per stream. Reads the hourly rollups of those hours only."""
    windows = list(MaintenanceWindow.objects.may_cover(since, until))
    if not windows:
        return {}
    tags = dict(Stream.objects.filter(stream_id__in=list(counts)).values_list("stream_id", "tag"))
    covered: dict[str, set[datetime]] = {}
    for stream_id in counts:
        hours: set[datetime] = set()
        for start, end in intervals(Target(stream_id, tags.get(stream_id, "")), since, until, windows):
            hour = HourlyRollup.hour_of(start)
            while hour < end:
                hours.add(hour)
                hour += HOUR
        if hours:
            covered[stream_id] = hours
    if not covered:
        return {}
    every_hour = sorted(set().union(*covered.values()))
    rows = HourlyRollup.objects.filter(stream_id__in=list(covered), hour__in=every_hour)
    histograms: dict[tuple[str, datetime], list[int]] = defaultdict(list)
    for row in rows.latency_sums("stream_id", "hour", confirmed=False):
        histograms[(row["stream_id"], row["hour"])] = row["unconfirmed"]
    for row in rows.objective_counts("stream_id", "hour"):
        if row["hour"] not in covered[row["stream_id"]]:
            continue
        into = counts[row["stream_id"]]
        into.total -= row["total"]
        into.failed -= row["failed"]
        into.not_first -= row["not_first"]
        for i, n in enumerate(histograms.get((row["stream_id"], row["hour"]), [])):
            into.latency[i] -= n
    return {stream_id: len(hours) for stream_id, hours in covered.items()}


@dataclass(frozen=True)
class BurnReading:
    """A stream's burn rates over a condition's two windows, for each objective, and whether it holds."""

    stream_id: str
    objective: Objective
    burn: Burn
    delivery: tuple[Measure, Measure]
    latency: tuple[Measure, Measure]

    @classmethod
    def idle(cls, stream_id: str, objective: Objective, burn: Burn) -> BurnReading:
        """The reading of a stream without deliveries in the windows: no rate, nothing burning."""
        delivery, latency = objective.measures(StreamCounts())
        return cls(stream_id, objective, burn, (delivery, delivery), (latency, latency))

    @staticmethod
    def _burns(pair: tuple[Measure, Measure], factor: float) -> bool:
        return all(m.burn_rate is not None and m.burn_rate >= factor for m in pair)

    @property
    def delivery_burns(self) -> bool:
        return self._burns(self.delivery, self.burn.factor)

    @property
    def latency_burns(self) -> bool:
        return self._burns(self.latency, self.burn.factor)

    @property
    def holds(self) -> bool:
        return self.delivery_burns or self.latency_burns


def burn_readings(now: datetime, burn: Burn, scope: tuple[str, str] | None = None) -> dict[str, BurnReading]:
    """Every stream's burn rates over the condition's two windows ending now (within `scope`)."""
    long_start, short_start = now - burn.long, now - burn.short
    windows = trailing_stream_counts(now, [long_start, short_start], scope)
    streams = sorted(windows[long_start])
    found: dict[str, BurnReading] = {}
    for stream_id, objective in objectives(streams).items():
        long_d, long_l = objective.measures(windows[long_start][stream_id])
        short_d, short_l = objective.measures(windows[short_start].get(stream_id, StreamCounts()))
        found[stream_id] = BurnReading(stream_id, objective, burn, (long_d, short_d), (long_l, short_l))
    return found
