"""Which attempt of a delivery a line of the provider's delivery logs records: one its retry schedule made, one
of our replays, or one that could be either. The one answer the delivery page's attempt history
(web/attempts.py) and the worker looking for a replay whose answer was lost (actions/services.py) both read.

A log names no history id: it matches a delivery by stream, chain and block (contract §4), and the two
deliveries of a block (unconfirmed, confirmed) share those. Its retry count does not tell a replay apart either:
the contract's provider leaves it unchanged, and a provider may as plausibly count the replay as one more retry.
Time does: our replay was made after our request went out (`ReplayItem.sent_at`) and before its answer came back
(or, for a lost answer, before we looked), while a scheduled attempt is made at its place on the published
schedule. A line inside a replay's interval where the schedule also places an attempt (of this delivery or of
the other delivery of its block) cannot be told apart: it is ambiguous, and nothing is sent on its strength.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dashboard.actions.models import ItemState, ReplayItem
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.schedule import MAX_RETRIES, attempt_at
from dashboard.upstream.streams import DeliveryLog

# How far the provider's clock may be from ours: a replay logged this much before our request went out, or after
# its answer came, is still taken for it.
CLOCK_SKEW = timedelta(seconds=2)
# A scheduled attempt is logged within this much of its place on the schedule (the provider's queue, its clock).
SCHEDULE_SLACK = timedelta(seconds=30)


class LogKind(enum.Enum):
    SCHEDULED = "scheduled attempt"
    OUR_REPLAY = "replay from here"
    # Inside one of our replays' intervals, where the schedule also places an attempt.
    AMBIGUOUS = "scheduled attempt or replay from here"
    # An attempt of this delivery that neither the schedule nor our replays explain: a replay asked elsewhere.
    ELSEWHERE = "attempt off the schedule"


@dataclass(frozen=True)
class ReplayWindow:
    """When one of our replays can have been made at the provider: from the moment its request went out to the
    moment its answer came (for a lost answer, the moment we looked in the logs)."""

    sent_at: datetime
    until: datetime

    def covers(self, at: datetime) -> bool:
        return self.sent_at - CLOCK_SKEW <= at <= self.until + CLOCK_SKEW

    def overlaps(self, other: ReplayWindow) -> bool:
        return self.sent_at - CLOCK_SKEW <= other.until + CLOCK_SKEW and other.sent_at - CLOCK_SKEW <= self.until + CLOCK_SKEW


# Items whose request may have reached the provider: a refused one was not acted on, a pending or skipped one
# never went out.
MAY_HAVE_ACTED = (ItemState.SENDING, ItemState.REPLAYED, ItemState.UNKNOWN)


def replay_window(item: ReplayItem, now: datetime) -> ReplayWindow | None:
    """The item's window, or None when its request never reached the provider. A request still out (or whose
    answer has not been looked for yet) is open until `now`."""
    if item.sent_at is None or item.state not in MAY_HAVE_ACTED:
        return None
    until = item.answered_at if item.answered_at is not None and item.state != ItemState.SENDING else now
    return ReplayWindow(item.sent_at, max(until, item.sent_at))


def replay_windows(items: Iterable[ReplayItem], now: datetime) -> list[ReplayWindow]:
    return [w for w in (replay_window(item, now) for item in items) if w is not None]


def block_neighbours(delivery_id: Any, stream_id: str, chain_id: str, block_number: int | None) -> list[datetime]:
    """First attempts of the other deliveries of the same block and stream: their scheduled attempts show in the
    logs under the same stream, chain and block."""
    if block_number is None:
        return []
    rows = Delivery.objects.filter(stream_id=stream_id, block_number=block_number).exclude(pk=delivery_id)
    if chain_id:
        rows = rows.filter(chain_id=chain_id)
    return list(rows.values_list("date", flat=True)[:10])


def _near(at: datetime, first_attempt: datetime, retries: Iterable[int]) -> bool:
    return any(abs(at - attempt_at(first_attempt, k)) <= SCHEDULE_SLACK for k in retries if 0 <= k <= MAX_RETRIES)


def schedule_due(at: datetime, first_attempt: datetime) -> bool:
    """Whether the published schedule places any attempt of a delivery first attempted then at about `at`."""
    return _near(at, first_attempt, range(MAX_RETRIES + 1))


def classify_log(
    entry: DeliveryLog,
    *,
    first_attempt: datetime,
    retries: int,
    replays: Sequence[ReplayWindow],
    neighbours: Sequence[datetime] = (),
) -> LogKind | None:
    """What a log line of this delivery's stream, chain and block records for the delivery first attempted at
    `first_attempt`, with `retries` as we last saw them, our `replays` of it, and the first attempts of the other
    deliveries of the block: None when it is not an attempt of this delivery.

    Independent of whether the provider counted a replay as a retry: our replays are recognised by time alone,
    and a scheduled attempt by its place on the schedule at the logged retry count or the one before it."""
    at = entry.created_at
    if at is None or entry.retries is None or entry.retries < 0:
        return None
    if any(window.covers(at) for window in replays):
        due = schedule_due(at, first_attempt) or any(schedule_due(at, other) for other in neighbours)
        return LogKind.AMBIGUOUS if due else LogKind.OUR_REPLAY
    # The count before: a provider that counted an earlier replay as a retry logs its later attempts one higher.
    counts = (entry.retries, entry.retries - 1)
    if _near(at, first_attempt, counts):
        return LogKind.SCHEDULED
    if any(_near(at, other, counts) for other in neighbours):
        return None
    if entry.retries >= retries and at > attempt_at(first_attempt, retries) + SCHEDULE_SLACK:
        return LogKind.ELSEWHERE
    return None
