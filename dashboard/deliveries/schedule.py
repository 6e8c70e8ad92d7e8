"""The provider's published retry schedule for a failed delivery, and where a delivery stands on it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import accumulate

# Seconds between attempts after a failure: 1 min, 10 min, 1 h, 2 h, 6 h, 12 h, 24 h.
RETRY_SCHEDULE_SECONDS: tuple[int, ...] = (60, 600, 3600, 7200, 21600, 43200, 86400)
MAX_RETRIES = len(RETRY_SCHEDULE_SECONDS)
# Seconds from the first attempt to attempt k (k = 0 is the first attempt itself).
ATTEMPT_OFFSETS: tuple[int, ...] = (0, *accumulate(RETRY_SCHEDULE_SECONDS))


@dataclass(frozen=True)
class RetrySchedule:
    """Where a failing delivery stands on the published schedule, from its first attempt and retries."""

    # The provider's next attempt; None once the schedule is used up or the provider stopped retrying.
    next_retry: datetime | None
    runs_out: datetime
    # Why the provider makes no more attempts whatever the schedule says (`retries_stopped`); "" while it retries.
    stopped: str = ""


def retries_stopped(provider_status: str) -> str:
    """Words for a delivery of a stream the provider does not have active (paused, error, terminated): it makes
    no further attempt, whatever the schedule says; "" for an active stream or one whose status is not read yet."""
    if provider_status in ("", "active"):
        return ""
    return f"retries stopped: stream {provider_status} at the provider"


def attempt_at(first_attempt: datetime, retries: int) -> datetime:
    """When the schedule places the attempt with this retry count (0: the first attempt; clamped to the
    schedule's length)."""
    return first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[max(0, min(retries, MAX_RETRIES))])


def retry_schedule(first_attempt: datetime, retries: int, provider_status: str = "") -> RetrySchedule:
    """The delivery's place on the schedule; with its stream's status at the provider, none once that stopped."""
    retries = max(0, min(retries, MAX_RETRIES))
    runs_out = first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[-1])
    stopped = retries_stopped(provider_status)
    if stopped:
        return RetrySchedule(None, runs_out, stopped)
    next_retry = first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[retries + 1]) if retries < MAX_RETRIES else None
    return RetrySchedule(next_retry, runs_out)
