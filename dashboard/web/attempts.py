"""A delivery's attempt history, from everything we know of it, each line saying where it comes from:

- the provider's delivery logs (exact: when each attempt was made and how it ended), read on request;
- the replays asked from the dashboard (when the provider answered, and how the attempt ended);
- what our polls saw change (retries, error text, status), with when they saw it — an upper bound on when
  the attempt was made;
- the published retry schedule, for the attempts nothing else accounts for.

Time to recovery follows from the first success among these, the most exact one first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from dashboard.actions.attempts import LogKind, block_neighbours, classify_log, replay_windows
from dashboard.actions.models import ItemState, ReplayItem
from dashboard.deliveries.models import Delivery, DeliveryChange
from dashboard.deliveries.schedule import MAX_RETRIES, attempt_at
from dashboard.deliveries.status import DeliveryStatus
from dashboard.upstream.streams import DeliveryLog

LOGS = "provider's log"
REPLAY = "replay from here"
POLL = "seen by a poll"
SCHEDULE = "by the schedule"
# An attempt the schedule places that a poll also saw (its retry count): one attempt, listed once.
SCHEDULE_SEEN = "by the schedule, seen by a poll"


@dataclass(frozen=True)
class Attempt:
    at: datetime
    origin: str
    retries: int | None
    succeeded: bool | None
    error: str
    # True where `at` is when the attempt was made, False where it is when we noticed it (or an estimate).
    exact: bool


@dataclass(frozen=True)
class Recovery:
    at: datetime
    # Seconds from the first attempt to the delivery that succeeded.
    after: float
    origin: str


def attempt_history(
    delivery: Delivery,
    *,
    changes: Sequence[DeliveryChange],
    replays: Sequence[ReplayItem],
    logs: Sequence[DeliveryLog] | None,
) -> list[Attempt]:
    """Every attempt we know of, oldest first."""
    attempts: list[Attempt] = []
    if logs:
        for entry, kind in log_kinds(delivery, replays=replays, logs=logs):
            if kind is None or entry.created_at is None:
                continue
            attempts.append(Attempt(entry.created_at, LOGS, entry.retries, entry.succeeded,
                                    entry.error_message or "", exact=True))
    for item in replays:
        if item.state == ItemState.REPLAYED and item.answered_at is not None:
            attempts.append(Attempt(item.answered_at, REPLAY, item.retries_before, item.delivered,
                                    "" if item.delivered else item.answer, exact=item.delivered is not None))
    # One attempt per retry count: a poll saw the attempt that its retry count names (the first time it saw that
    # count; a later change at the same count, such as the status giving up, is no new attempt), which the
    # provider's logs or the schedule also place.
    seen: dict[int, DeliveryChange] = {}
    for change in changes:
        seen.setdefault(change.retries, change)
    logged = {a.retries for a in attempts if a.origin == LOGS}
    if not logs:
        # The schedule's attempts up to the retry count we hold (the first one at the delivery's date), with what
        # a poll saw of each. A delivery a replay delivered did not succeed on the schedule.
        replayed = any(item.delivered for item in replays)
        last = max(0, min(delivery.retries, MAX_RETRIES))
        for k in range(last + 1):
            final = k == last
            polled = seen.pop(k) if k in seen else None
            attempts.append(Attempt(
                attempt_at(delivery.date, k), SCHEDULE_SEEN if polled else SCHEDULE, k,
                (not delivery.is_failure and not replayed) if final else False,
                (polled.error_message if polled else "") or (delivery.error_message if final else ""), exact=k == 0,
            ))
    for retries, change in seen.items():
        if retries not in logged:
            attempts.append(Attempt(change.seen_at, POLL, change.retries, change.status == DeliveryStatus.DELIVERED,
                                    change.error_message, exact=False))
    return sorted(attempts, key=lambda a: (a.at, a.origin))


def log_kinds(
    delivery: Delivery, *, replays: Sequence[ReplayItem], logs: Sequence[DeliveryLog], now: datetime | None = None
) -> list[tuple[DeliveryLog, LogKind | None]]:
    """What each log line of the delivery's block records for it, as the worker re-reading a lost replay answer
    sees it (actions/attempts.py): a block's two deliveries (unconfirmed, confirmed) share stream, chain and
    block, and their attempts are told apart by time; None for a line that is not this delivery's."""
    windows = replay_windows(replays, now or timezone.now())
    neighbours = block_neighbours(delivery.pk, delivery.stream_id, delivery.chain_id, delivery.block_number)
    return [
        (entry, classify_log(entry, first_attempt=delivery.date, retries=delivery.retries, replays=windows,
                             neighbours=neighbours))
        for entry in logs
    ]


def recovery(delivery: Delivery, attempts: Sequence[Attempt]) -> Recovery | None:
    """When a delivery that failed first was delivered, from the most exact evidence; None if it has not
    recovered or never failed."""
    if delivery.is_failure:
        return None
    failed_first = any(a.succeeded is False for a in attempts) or delivery.retries > 0
    if not failed_first:
        return None
    for origins in ((LOGS,), (REPLAY,), (SCHEDULE, SCHEDULE_SEEN), (POLL,)):
        successes = [a for a in attempts if a.origin in origins and a.succeeded]
        if successes:
            first = successes[0]
            return Recovery(first.at, (first.at - delivery.date).total_seconds(), first.origin)
    return None
