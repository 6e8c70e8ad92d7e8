"""A stream's expected volume, learned from its own history, and whether what arrived is improbably low.

The baseline: for each hour of the week (UTC), the stream's mean deliveries in that hour over the last
QUIET_BASELINE_WEEKS weeks, from the hourly rollups (one grouped read for every stream), leaving out the hours a
maintenance window covered and those before the stream's first delivery. The expected count λ of a window is the
sum of its hours' means (a partial hour by its share). Deliveries arrive roughly as a Poisson process at that
rate, so seeing `seen` or fewer where λ were expected has probability P(X ≤ seen | Poisson(λ)); a stream is
quiet when that is below the rule's probability. Deliveries do not arrive one by one, though: a block brings its
unconfirmed and its confirmed delivery, often several events each, so a stream's counts vary more than a Poisson
count of the same mean, and its silences follow the rate of its blocks, not of its deliveries. Each baseline
therefore also learns the stream's dispersion D (the variance of its hourly counts over their hour-of-week means,
at least 1: ~2 for a stream of unconfirmed and confirmed pairs) and judges the window quasi-Poisson, in units of D
deliveries: P(X ≤ ⌊seen / D⌋ | Poisson(λ / D)). A stream with three deliveries a day expects ~0.1 in an hour:
an hour of silence has probability 0.9, never quiet.

The windows judged end now and start at the last delivery (seen 0: a silence), or 1, 6 or 24 hours back from
the current hour (seen counted from the same rollups: a trickle); the least probable is the verdict. No verdict
(cold start) before QUIET_MIN_HISTORY_DAYS of history or below QUIET_MIN_EXPECTED expected deliveries. The
provider's outage hours (a stream not active) are not left out yet: the status history is another change's."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q, Sum

from dashboard import visibility
from dashboard.deliveries.models import HourlyRollup, OutageWindow, Stream
from dashboard.expectations.maintenance import Target, intervals
from dashboard.expectations.models import MaintenanceWindow
from dashboard.visibility import EVERYTHING, viewing

HOUR = timedelta(hours=1)
WEEK_HOURS = 7 * 24
TRAILING_HOURS = (1, 6, 24)
# Longer trailing windows are judged only while the latest hour's count is below this probability.
RECENT_NORMAL = 0.05
# Above this many expected deliveries the Poisson CDF is read from its normal approximation.
EXACT_UP_TO = 1000


def hour_of_week(hour: datetime) -> int:
    return hour.weekday() * 24 + hour.hour


def poisson_cdf(seen: int, expected: float) -> float:
    """P(X ≤ seen) for X ~ Poisson(expected)."""
    if seen < 0:
        return 0.0
    if expected <= 0 or seen >= expected:
        # At or above the mean the probability is at least about a half: never improbably low.
        return 1.0 if expected <= 0 else min(1.0, 0.5 + 0.5 * math.erf((seen + 0.5 - expected) / math.sqrt(2 * expected)))
    if expected > EXACT_UP_TO:
        return 0.5 * math.erfc(-(seen + 0.5 - expected) / math.sqrt(2 * expected))
    term = math.exp(-expected)
    total = term
    for k in range(1, seen + 1):
        term *= expected / k
        total += term
    return min(total, 1.0)


@dataclass
class Baseline:
    """A stream's mean deliveries per hour of the week, and the history it was learned from."""

    stream_id: str
    first_hour: datetime | None
    sums: list[int] = field(default_factory=lambda: [0] * WEEK_HOURS)
    weeks: list[int] = field(default_factory=lambda: [0] * WEEK_HOURS)
    # Variance over mean of the hourly counts (at least 1): how many deliveries arrive together.
    dispersion: float = 1.0

    def probability(self, seen: int, expected: float) -> float:
        """P(so few) for the stream: quasi-Poisson in units of its dispersion."""
        return poisson_cdf(math.floor(seen / self.dispersion), expected / self.dispersion)

    def mean(self, how: int) -> float:
        if self.weeks[how]:
            return self.sums[how] / self.weeks[how]
        counted = sum(self.weeks)
        return sum(self.sums) / counted if counted else 0.0

    def expected(self, start: datetime, end: datetime) -> float:
        """λ of [start, end): each hour's mean, a partial hour by the share of it inside."""
        total = 0.0
        hour = HourlyRollup.hour_of(start)
        while hour < end:
            inside = (min(hour + HOUR, end) - max(hour, start)) / HOUR
            total += self.mean(hour_of_week(hour)) * inside
            hour += HOUR
        return total

    def history(self, now: datetime) -> timedelta:
        """How long the stream has been known (from its first delivery): the cold start's measure."""
        return now - self.first_hour if self.first_hour else timedelta(0)


@dataclass(frozen=True)
class Verdict:
    """What arrived in the least probable window ending now, against what was expected."""

    stream_id: str
    since: datetime
    expected: float
    seen: int
    probability: float
    cold: str = ""

    def quiet(self, threshold: float) -> bool:
        return not self.cold and self.probability < threshold


def baselines(now: datetime, stream_ids: list[str] | None = None) -> dict[str, Baseline]:
    """Every stream's baseline (or these streams'), learned from the weeks before the last day; cached until the
    hour ends (a backfill or a new window shows from the next hour on)."""
    current = HourlyRollup.hour_of(now)
    key = f"quiet-baselines:{current:%Y%m%d%H}"
    cached: dict[str, Baseline] | None = cache.get(key)
    if cached is None:
        # Learned for every stream and cached for all; each viewer is given only the streams they see.
        with viewing(EVERYTHING):
            cached = _learn(current)
        cache.set(key, cached, 3600)
    seen = visibility.current()
    wanted = cached if stream_ids is None else {s: cached[s] for s in stream_ids if s in cached}
    return {s: baseline for s, baseline in wanted.items() if seen.allows(s)}


def _learn(current: datetime) -> dict[str, Baseline]:
    # The weeks before the last day: the windows judged (up to a day) never teach the baseline their own silence.
    current -= timedelta(hours=max(TRAILING_HOURS))
    start = current - timedelta(weeks=settings.QUIET_BASELINE_WEEKS)
    streams = {s.stream_id: s for s in Stream.objects.exclude(first_delivery_at=None).only("stream_id", "tag", "first_delivery_at")}
    counts: dict[str, dict[datetime, int]] = defaultdict(dict)
    rows = (
        HourlyRollup.objects.filter(hour__gte=start, hour__lt=current)
        .values("stream_id", "hour").annotate(n=Sum("deliveries")).order_by()
    )
    for row in rows:
        counts[row["stream_id"]][row["hour"]] = row["n"]
    windows = list(MaintenanceWindow.objects.may_cover(start, current))
    # Hours the stream could not deliver (the provider had it paused, in error or terminated; a marked address
    # reload) teach nothing about its normal volume.
    outages: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    overlapping = OutageWindow.objects.outages().filter(start__lt=current).filter(Q(end__isnull=True) | Q(end__gt=start))
    for stream_id, began, ended in overlapping.values_list("stream__stream_id", "start", "end"):
        outages[stream_id].append((began, ended or current))
    found: dict[str, Baseline] = {}
    for stream_id, stream in streams.items():
        first = HourlyRollup.hour_of(stream.first_delivery_at) if stream.first_delivery_at else None
        baseline = Baseline(stream_id, first)
        left_out = intervals(Target(stream_id, stream.tag), start, current, windows) + outages.get(stream_id, [])
        hours = counts.get(stream_id, {})
        hour = max(start, first) if first else current
        counted: list[datetime] = []
        while hour < current:
            if not any(a < hour + HOUR and b > hour for a, b in left_out):
                how = hour_of_week(hour)
                baseline.sums[how] += hours.get(hour, 0)
                baseline.weeks[how] += 1
                counted.append(hour)
            hour += HOUR
        baseline.dispersion = _dispersion(baseline, [(h, hours.get(h, 0)) for h in counted])
        found[stream_id] = baseline
    return found


def _dispersion(baseline: Baseline, counted: list[tuple[datetime, int]]) -> float:
    """The index of dispersion of the counted hours around their hour-of-week means: Σ (n − mean)² / mean over the
    hours whose mean is above 0, divided by their number, the means' own estimate corrected for (each mean is
    learned from the `weeks` hours it judges: their spread around it is (w − 1) / w of the true one). At least 1."""
    total = 0.0
    degrees = 0.0
    for hour, n in counted:
        how = hour_of_week(hour)
        mean = baseline.mean(how)
        weeks = baseline.weeks[how]
        if mean <= 0 or weeks < 2:
            continue
        total += (n - mean) ** 2 / mean
        degrees += (weeks - 1) / weeks
    return max(1.0, total / degrees) if degrees else 1.0


def verdicts(now: datetime, stream_ids: list[str] | None = None) -> dict[str, Verdict]:
    """Each stream's verdict at `now`: the least probable of its windows ending now."""
    learned = baselines(now, stream_ids)
    if not learned:
        return {}
    current = HourlyRollup.hour_of(now)
    recent = current - timedelta(hours=max(TRAILING_HOURS) - 1)
    seen: dict[str, dict[datetime, int]] = defaultdict(dict)
    rows = HourlyRollup.objects.filter(hour__gte=recent, stream_id__in=list(learned))
    for row in rows.values("stream_id", "hour").annotate(n=Sum("deliveries")).order_by():
        seen[row["stream_id"]][row["hour"]] = row["n"]
    last = dict(Stream.objects.filter(stream_id__in=list(learned)).values_list("stream_id", "last_delivery_at"))
    minimum_history = timedelta(days=settings.QUIET_MIN_HISTORY_DAYS)
    found: dict[str, Verdict] = {}
    for stream_id, baseline in learned.items():
        candidates: list[Verdict] = []
        recent_probability = 0.0
        last_delivery = last.get(stream_id)
        if last_delivery is not None and last_delivery < now:
            expected = baseline.expected(last_delivery, now)
            candidates.append(Verdict(stream_id, last_delivery, expected, 0, baseline.probability(0, expected)))
        for hours in TRAILING_HOURS:
            since = current - timedelta(hours=hours - 1)
            count = sum(n for hour, n in seen[stream_id].items() if hour >= since)
            expected = baseline.expected(since, now)
            probability = baseline.probability(count, expected)
            if hours > TRAILING_HOURS[0] and recent_probability >= RECENT_NORMAL:
                # The latest hour is not unusually low: a longer window's low count is a quiet spell that has
                # ended, not a quiet stream.
                break
            candidates.append(Verdict(stream_id, since, expected, count, probability))
            recent_probability = probability
        # Windows expecting too little say nothing either way (a sparse stream's hour).
        eligible = [v for v in candidates if v.expected >= settings.QUIET_MIN_EXPECTED]
        verdict = min(eligible or candidates, key=lambda v: (v.probability, -v.expected))
        cold = ""
        if baseline.history(now) < minimum_history:
            cold = f"learning: {baseline.history(now).days} of {settings.QUIET_MIN_HISTORY_DAYS} days of history"
        elif not eligible:
            cold = f"fewer than {settings.QUIET_MIN_EXPECTED} expected"
        found[stream_id] = Verdict(verdict.stream_id, verdict.since, verdict.expected, verdict.seen,
                                   verdict.probability, cold)
    return found
