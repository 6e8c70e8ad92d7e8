"""An estimate of the provider's health rule for webhook URLs, replayed from our own history.

The provider keeps a success rate per webhook URL: it starts at 100, loses 1 per failed attempt, gains 1
per successful one and is capped at 100. Below 70 the streams sending to that URL go into `error` and
stop sending. We cannot read that number, but we can replay it: every stored delivery says how many
attempts it took (its retries) and whether the last one succeeded, and the published retry schedule
says when each attempt happened.

Resolution is one hour (the rollups). Within an hour successes and failures are taken as interleaved,
so an hour moves the rate by (successes - failures). The replay starts at 100 at the start of the window.

The replay depends only on the rollups of the window and on the hour `now` falls in, so it is computed once
for each (hour, state of the rollups, `HourlyRollup.objects.change_stamp`) and kept in the cache: pages
and alert checks read it, and a poll that wrote rows computes it again at once (`polling.jobs`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from redis.exceptions import RedisError

from dashboard.deliveries.models import PROVIDER_FAILING, HourlyRollup
from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, RETRY_SCHEDULE_SECONDS
from dashboard.deliveries.status import DeliveryStatus
from dashboard.visibility import EVERYTHING, current, viewing

ERROR_BELOW = 70
WARN_BELOW = 85
# Warn when the recent trend would cross the error line within this many hours.
WARN_HORIZON_HOURS = 6
TREND_HOURS = 3
WINDOW = timedelta(days=7)
# Entries outlive their hour only by this much; a new hour or new rollups make a new key anyway.
CACHE_SECONDS = 2 * 3600

log = logging.getLogger(__name__)


@dataclass
class UrlHealth:
    webhook_url: str
    rate: int = 100
    lowest: int = 100
    trend_per_hour: float = 0.0
    hours_to_error: float | None = None
    attempts: int = 0
    failed_attempts: int = 0
    history: list[int] = field(default_factory=list)
    # The provider's own status of the stream this estimate is shown for, once synced (`checked`).
    provider_status: str = ""

    @property
    def stopped_at_provider(self) -> bool:
        """The provider, once read, has the stream in error or terminated: it sends nothing."""
        return self.provider_status in PROVIDER_FAILING

    @property
    def state(self) -> str:
        if self.stopped_at_provider:
            # The provider's word, once read, outranks the replay: a stream it has in error (or terminated)
            # sends nothing, whatever our history of it replays to.
            return "error"
        return self.estimate_state

    @property
    def estimate_state(self) -> str:
        """What the replay says, where the provider's "active" only tempers it (below)."""
        if self.rate < ERROR_BELOW:
            # The provider's own status outranks the replay: a stream it keeps active is not in error, so
            # its own rate is still at or above the line; the replay is then only a warning.
            return "at-risk" if self.provider_status == "active" else "error"
        if self.rate < WARN_BELOW or (self.hours_to_error is not None and self.hours_to_error <= WARN_HORIZON_HOURS):
            return "at-risk"
        return "ok"

    @property
    def state_label(self) -> str:
        if self.stopped_at_provider:
            return f"{self.provider_status.capitalize()} at the provider"
        return {"error": "Likely in error", "at-risk": "At risk", "ok": "Healthy"}[self.state]

    @property
    def explanation(self) -> str:
        text = f"Estimated provider success rate {self.rate} (error below {ERROR_BELOW})"
        if self.hours_to_error is not None and self.state != "error":
            text += f"; at the last {TREND_HOURS} h pace it falls below {ERROR_BELOW} in about "
            text += f"{self.hours_to_error:.0f} h" if self.hours_to_error >= 1 else "less than an hour"
        if self.lowest < self.rate:
            text += f"; lowest in 7 days {self.lowest}"
        if self.provider_note:
            text += f". {self.provider_note}"
        return text

    @property
    def provider_note(self) -> str:
        """Why the estimate is shown otherwise than its rate says, when the provider's status says so."""
        if self.provider_status == "terminated":
            return (
                "The provider reports the stream terminated: it sends nothing, and a terminated stream cannot be "
                "reactivated, only recreated, whatever the replay of its rule gives"
            )
        if self.provider_status in ("error", "paused"):
            return (
                f"The provider reports the stream {self.provider_status}: it sends nothing until the stream is "
                "reactivated" + (", whatever the replay of its rule gives" if self.stopped_at_provider else "")
            )
        if self.rate < ERROR_BELOW and self.provider_status == "active":
            return (
                f"The provider still has the stream active, so its own rate is at least {ERROR_BELOW}: our "
                "replay counts failed attempts the provider did not (or not yet), so this is at risk, not in error"
            )
        return ""


def checked(health: UrlHealth | None, provider_status: str) -> UrlHealth | None:
    """A stream's estimate checked against the provider's status of that stream, once it has been read."""
    if health is None or not provider_status:
        return health
    return replace(health, provider_status=provider_status)


def replay(rows: Iterable[dict[str, Any]], now: datetime) -> dict[str, UrlHealth]:
    """Rows of (webhook_url, hour, status, retries, n) from the rollups, oldest first."""
    successes: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    failures: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        url, first, retries, n = row["webhook_url"], row["hour"], max(0, int(row["retries"])), int(row["n"])
        retries = min(retries, len(RETRY_SCHEDULE_SECONDS))
        failed_attempts = retries if row["status"] == DeliveryStatus.DELIVERED else retries + 1
        for k in range(failed_attempts):
            # The record says the attempt happened; if the schedule puts it in the future, it came early.
            at = first + timedelta(seconds=ATTEMPT_OFFSETS[k])
            failures[url][HourlyRollup.hour_of(min(at, now))] += n
        if row["status"] == DeliveryStatus.DELIVERED:
            at = first + timedelta(seconds=ATTEMPT_OFFSETS[retries])
            successes[url][HourlyRollup.hour_of(min(at, now))] += n
    result: dict[str, UrlHealth] = {}
    end = HourlyRollup.hour_of(now)
    for url in set(successes) | set(failures):
        health = UrlHealth(url)
        hours = sorted(set(successes[url]) | set(failures[url]))
        slot = hours[0]
        rate = 100
        while slot <= end:
            s, f = successes[url].get(slot, 0), failures[url].get(slot, 0)
            rate = max(0, min(100, rate + s - f))
            health.attempts += s + f
            health.failed_attempts += f
            health.lowest = min(health.lowest, rate)
            health.history.append(rate)
            slot += timedelta(hours=1)
        health.rate = rate
        if len(health.history) > TREND_HOURS:
            health.trend_per_hour = (rate - health.history[-1 - TREND_HOURS]) / TREND_HOURS
            if health.trend_per_hour < 0 and rate >= ERROR_BELOW:
                health.hours_to_error = (rate - ERROR_BELOW + 1) / -health.trend_per_hour
        result[url] = health
    return result


def worst(healths: Iterable[UrlHealth]) -> UrlHealth | None:
    order = {"error": 0, "at-risk": 1, "ok": 2}
    candidates = sorted(healths, key=lambda h: (order[h.state], h.rate))
    return candidates[0] if candidates else None


def url_health_now(now: datetime, urls: Iterable[str] | None = None) -> dict[str, UrlHealth]:
    """The estimate for every webhook URL (or only `urls`) from the rollups of the last WINDOW."""
    # Learned from every stream's rollups and cached for all; each viewer is shown only their streams' URLs.
    with viewing(EVERYTHING):
        estimate = _estimate(now)
    seen = current()
    if urls is None:
        return {url: health for url, health in estimate.items() if seen.allows_url(url)}
    # Each URL's replay reads only its own rows, so picking from the whole estimate changes nothing.
    return {url: estimate[url] for url in urls if url in estimate and seen.allows_url(url)}


def _estimate(now: datetime) -> dict[str, UrlHealth]:
    hour = HourlyRollup.hour_of(now)
    since = HourlyRollup.hour_of(now - WINDOW)
    key = f"url-health:{hour:%Y%m%dT%H}:{HourlyRollup.objects.change_stamp(since)}"
    try:
        cached = cache.get(key)
    except RedisError as exc:
        log.warning("url health: cache unreachable, replaying: %s", exc)
        cached = None
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    estimate = replay(HourlyRollup.objects.between(since, None).attempts_by_url(), now)
    try:
        cache.set(key, estimate, CACHE_SECONDS)
    except RedisError as exc:
        log.warning("url health: could not cache the estimate: %s", exc)
    return estimate
