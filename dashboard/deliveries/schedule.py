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

    # The provider's next attempt; None once the schedule is used up.
    next_retry: datetime | None
    runs_out: datetime


def attempt_at(first_attempt: datetime, retries: int) -> datetime:
    """When the schedule places the attempt with this retry count (0: the first attempt; clamped to the
    schedule's length)."""
    return first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[max(0, min(retries, MAX_RETRIES))])


def retry_schedule(first_attempt: datetime, retries: int) -> RetrySchedule:
    retries = max(0, min(retries, MAX_RETRIES))
    next_retry = first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[retries + 1]) if retries < MAX_RETRIES else None
    return RetrySchedule(next_retry, first_attempt + timedelta(seconds=ATTEMPT_OFFSETS[-1]))
