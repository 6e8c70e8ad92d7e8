"""Retry statistics from rollup counts per (dimension, status, retries).

A delivered row with r retries succeeded on attempt r + 1, which the published schedule places
ATTEMPT_OFFSETS[r] after the first attempt: that is its time to success — unless a replay asked from the
dashboard delivered it, whose answer says exactly when (`add_exact`): the attempt history is more exact than
the schedule there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES
from dashboard.deliveries.status import DeliveryStatus

# The retries distribution's bars, drawn as SVG (no inline styles: the Content-Security-Policy forbids them).
BAR_WIDTH = 9
BAR_PITCH = 11


@dataclass
class RetryRow:
    key: str
    label: str = ""
    # Deliveries by retries 0..MAX_RETRIES, all statuses.
    distribution: list[int] = field(default_factory=lambda: [0] * (MAX_RETRIES + 1))
    delivered_after: list[int] = field(default_factory=lambda: [0] * (MAX_RETRIES + 1))
    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    # (retries, seconds to success) of delivered deliveries whose success time is known exactly.
    exact: list[tuple[int, float]] = field(default_factory=list)

    def add_exact(self, retries: int, seconds: float) -> None:
        self.exact.append((max(0, min(retries, MAX_RETRIES)), max(0.0, seconds)))

    @property
    def total(self) -> int:
        return self.delivered + self.retrying + self.failed

    @property
    def retried(self) -> int:
        return self.total - self.distribution[0]

    @property
    def first_try_share(self) -> float | None:
        return 100.0 * self.delivered_after[0] / self.total if self.total else None

    @property
    def eventually_share(self) -> float | None:
        """Of the deliveries that needed a retry and are settled, the share that got through."""
        settled = self.delivered - self.delivered_after[0] + self.failed
        return 100.0 * (self.delivered - self.delivered_after[0]) / settled if settled else None

    @property
    def median_time_to_success(self) -> int | None:
        """Median seconds from first attempt to success among deliveries that needed at least one retry (or a
        replay): the schedule's time for each, the exact one where a replay's answer gives it."""
        times: dict[float, int] = {}
        exact_at = [0] * (MAX_RETRIES + 1)
        for retries, seconds in self.exact:
            exact_at[retries] += 1
            times[seconds] = times.get(seconds, 0) + 1
        for retries in range(1, MAX_RETRIES + 1):
            scheduled = self.delivered_after[retries] - exact_at[retries]
            if scheduled > 0:
                times[ATTEMPT_OFFSETS[retries]] = times.get(ATTEMPT_OFFSETS[retries], 0) + scheduled
        # A delivery with no retry that a replay delivered did need more than its first attempt.
        n = sum(times.values())
        if not n:
            return None
        middle = (n + 1) // 2
        seen = 0
        for seconds in sorted(times):
            seen += times[seconds]
            if seen >= middle:
                return int(seconds)
        return None

    @property
    def bars(self) -> list[tuple[int, int, int, float, float]]:
        """(retries, count, x, y, height) of each bar of the distribution, in SVG units: bars 9 wide and
        11 apart, 100 high at the peak; an empty bar keeps a sliver so the baseline shows."""
        peak = max(self.distribution[1:] or [0]) or 1
        bars = []
        for index, (retries, count) in enumerate(list(enumerate(self.distribution))[1:]):
            height = max(4.0, 100.0 * count / peak)
            bars.append((retries, count, index * BAR_PITCH, 100.0 - height, height))
        return bars

    @property
    def bars_width(self) -> int:
        return (len(self.distribution) - 1) * BAR_PITCH - (BAR_PITCH - BAR_WIDTH)


def retry_rows(rows: Iterable[dict[str, Any]], dimension: str) -> tuple[list[RetryRow], RetryRow]:
    result: dict[str, RetryRow] = {}
    overall = RetryRow("all", "All deliveries")
    for row in rows:
        key = row[dimension]
        entry = result.get(key)
        if entry is None:
            entry = result[key] = RetryRow(key, row.get("tag", key) or "")
        retries = max(0, min(int(row["retries"]), MAX_RETRIES))
        for target in (entry, overall):
            target.distribution[retries] += row["n"]
            if row["status"] == DeliveryStatus.DELIVERED:
                target.delivered += row["n"]
                target.delivered_after[retries] += row["n"]
            elif row["status"] == DeliveryStatus.RETRYING:
                target.retrying += row["n"]
            else:
                target.failed += row["n"]
    ordered = sorted(result.values(), key=lambda r: (-r.retried, r.label, r.key))
    return ordered, overall
