"""Preparing, confirming, running and cancelling actions at the provider. Views and the task call these.

Exactly once: a prepared action is a DRAFT row; confirming it is a conditional UPDATE (DRAFT -> QUEUED), so a
double submit queues it once; the worker claims each replayed delivery (PENDING -> SENDING) before its request
goes out, so a redelivered task or a second worker never sends it again. A request whose answer was lost
(`OutcomeUnknown`, or an item found SENDING by a later run because its worker died) is never sent again: the
provider's delivery logs are read for the attempt (replays, recognised from the moment the request went out:
actions/attempts.py) or the stream is read again (status changes). A replay the logs do not show for certain is
left "answer lost" for a person to look at.

The reads the pages make of replays are `ReplayItem.objects` methods (actions/models.py). The worker's task
(actions/tasks.py) calls into this module; this module never imports it: `confirm` is handed what queues the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboard.actions.attempts import (
    CLOCK_SKEW,
    MAY_HAVE_ACTED,
    LogKind,
    block_neighbours,
    classify_log,
    replay_window,
)
from dashboard.actions.models import (
    ACT_AT_PROVIDER,
    ActionKind,
    ActionState,
    ItemState,
    ProviderAction,
    ReplayItem,
)
from dashboard.actions.refusals import refusal
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import DeliveryQuerySet, Stream
from dashboard.deliveries.records import parse_record
from dashboard.sources.clients import page_client, streams_client
from dashboard.sources.models import Source
from dashboard.times import iso_minutes
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.history import iter_history_pages
from dashboard.upstream.streams import (
    SETTABLE_STATUSES,
    DeliveryLog,
    StreamKind,
    fetch_stream,
    logs_of_block,
    replay_delivery,
    resend_block,
    set_stream_status,
)

log = logging.getLogger(__name__)

# How long a run waits for a 429's Retry-After before it asks again, at most.
MAX_RATE_LIMIT_WAIT = 60.0
# Pages of delivery logs read to find the attempt of a replay whose answer was lost.
REREAD_LOG_PAGES = 5
# Times the logs are read for one lost answer (a later run reads again: the provider may log late).
MAX_REREADS = 2
# Pages of /history (newest first) read to find the delivery of a re-sent block whose answer was lost.
REREAD_HISTORY_PAGES = 10


class ActionRefused(Exception):
    """The action cannot be prepared or confirmed; the message says why, in words for the user."""


def writes_enabled() -> bool:
    return bool(settings.PROVIDER_WRITES)


def can_act(user: Any) -> bool:
    """May this user act at the provider here? Needs the permission, and writes switched on."""
    return bool(
        writes_enabled() and user.is_authenticated and user.is_active and user.has_perm(ACT_AT_PROVIDER)
    )


# -- preparing ----------------------------------------------------------------------------------


def _new_action(user: Any, *, by: str = "", **fields: Any) -> ProviderAction:
    # `by`: the name the audit shows when not the user's own, e.g. "alice (token deploy-bot)" from the API.
    return ProviderAction.objects.create(requested_by=user, requested_by_name=(by or user.get_username())[:150], **fields)


def prepare_replay(
    user: Any, deliveries: DeliveryQuerySet, *, scope: str, filters: str = "", by: str = ""
) -> ProviderAction:
    """A DRAFT replay of exactly these deliveries (at most REPLAY_MAX_DELIVERIES), to be confirmed."""
    cap = int(settings.REPLAY_MAX_DELIVERIES)
    rows = list(
        deliveries.order_by("date", "id").values_list(
            "id", "source_id", "stream_id", "chain_id", "block_number", "retries", "status", "date"
        )[: cap + 1]
    )
    if not rows:
        raise ActionRefused("No delivery matches this filter: there is nothing to replay.")
    if len(rows) > cap:
        raise ActionRefused(
            f"This filter matches more than {cap:,} deliveries, the most one replay may send "
            "(REPLAY_MAX_DELIVERIES). Narrow it (a stream, a time range, an error group) and try again."
        )
    sources = {row[1] for row in rows}
    if len(sources) > 1:
        raise ActionRefused("These deliveries come from several sources; filter to one stream or source first.")
    streams = {row[2] for row in rows}
    with transaction.atomic():
        action = _new_action(
            user,
            by=by,
            kind=ActionKind.REPLAY,
            source_id=sources.pop(),
            stream_id=next(iter(streams)) if len(streams) == 1 else "",
            scope=scope,
            filters=filters[:4000],
            target_count=len(rows),
        )
        ReplayItem.objects.bulk_create(
            ReplayItem(
                action=action,
                delivery_id=pk,
                stream_id=stream_id,
                chain_id=chain_id,
                block_number=block,
                retries_before=retries,
                status_before=status,
                delivery_date=date,
            )
            for pk, _source, stream_id, chain_id, block, retries, status, date in rows
        )
    return action


def _fresh_stream(stream: Stream) -> tuple[str, str, str]:
    """(status, message, where from): the provider's answer now, else the last sync's."""
    source = stream.source
    try:
        live = fetch_stream(page_client(source, source.streams_base_url), stream.stream_id,
                            kind="aptos" if stream.provider_kind == "aptos" else "evm")
    except errors.UpstreamError as exc:
        synced = iso_minutes(stream.provider_seen_at) if stream.provider_seen_at else "never"
        return (
            stream.provider_status,
            stream.provider_status_message,
            f"from the last sync ({synced}); the provider could not be asked now: {exc.message}",
        )
    return live.status or "", live.status_message or "", "as the provider answered just now"


def prepare_status_change(user: Any, stream: Stream, wanted: str, *, by: str = "") -> tuple[ProviderAction, str]:
    """A DRAFT status change, with the stream's current status and message; also says where those came from."""
    if wanted not in SETTABLE_STATUSES:
        raise ActionRefused("A stream can be set to active or paused; error and terminated are the provider's to set.")
    status, message, origin = _fresh_stream(stream)
    if status == "terminated":
        raise ActionRefused("The provider has terminated this stream; it cannot be reactivated, only recreated.")
    if status == wanted:
        raise ActionRefused(f"The stream is already {wanted} at the provider ({origin}).")
    verb = "Reactivate" if wanted == "active" else "Pause"
    action = _new_action(
        user,
        by=by,
        kind=ActionKind.SET_STATUS,
        source=stream.source,
        stream_id=stream.stream_id,
        scope=f"{verb} stream {stream.tag or stream.stream_id} ({stream.stream_id}): "
        f"status {status or 'unknown'} → {wanted}",
        wanted_status=wanted,
        status_before=status,
        status_message_before=message[:2000],
        target_count=1,
    )
    return action, origin


def prepare_resend_block(user: Any, stream: Stream, chain_id: str, block_number: int) -> ProviderAction:
    return _new_action(
        user,
        kind=ActionKind.RESEND_BLOCK,
        source=stream.source,
        stream_id=stream.stream_id,
        chain_id=chain_id,
        block_number=block_number,
        scope=f"Re-send block {block_number} of chain {chain_id} to stream {stream.tag or stream.stream_id} "
        f"({stream.stream_id})",
        target_count=1,
    )


def prepare_resend_blocks(user: Any, scan: Any, blocks: list[tuple[str, int]], *, by: str = "") -> ProviderAction:
    """A DRAFT re-send of these missing blocks of a scan's stream, one item per block. A block already asked
    for by another re-send that may have reached the provider (sent, re-sent, answer lost, or still waiting) is
    left out: each block is re-sent once; one whose answer was lost is for a person to check."""
    stream = Stream.objects.select_related("source").filter(stream_id=scan.stream_id).first()
    if stream is None:
        raise ActionRefused("The stream of this scan is not known here any more.")
    asked = set(
        ReplayItem.objects.filter(
            stream_id=scan.stream_id, delivery_id__isnull=True,
            state__in=[ItemState.PENDING, ItemState.SENDING, ItemState.REPLAYED, ItemState.UNKNOWN],
        ).exclude(action__state__in=[ActionState.DRAFT, ActionState.EXPIRED, ActionState.CANCELLED])
        .values_list("chain_id", "block_number")
    )
    wanted = sorted({(chain, number) for chain, number in blocks} - asked)
    if not wanted:
        raise ActionRefused("No missing block is left to re-send: each was re-sent already, or none is missing.")
    cap = int(settings.REPLAY_MAX_DELIVERIES)
    if len(wanted) > cap:
        raise ActionRefused(f"{len(wanted):,} blocks are missing, more than one re-send may target "
                            f"(REPLAY_MAX_DELIVERIES, {cap:,}).")
    chains = sorted({chain for chain, _ in wanted})
    first, last = wanted[0][1], wanted[-1][1]
    with transaction.atomic():
        action = _new_action(
            user,
            by=by,
            kind=ActionKind.RESEND_BLOCKS,
            source=stream.source,
            stream_id=stream.stream_id,
            scan=scan,
            scope=f"Re-send {len(wanted)} missing block{'s' if len(wanted) != 1 else ''} (chain "
            f"{', '.join(chains)}, blocks {first}–{last}) to stream {stream.tag or stream.stream_id} "
            f"({stream.stream_id}), as found by block scan #{scan.pk}",
            target_count=len(wanted),
        )
        ReplayItem.objects.bulk_create(
            ReplayItem(action=action, stream_id=stream.stream_id, chain_id=chain, block_number=number,
                       status_before="missing")
            for chain, number in wanted
        )
    return action


# -- confirming and cancelling ------------------------------------------------------------------


# How many streams of a bulk replay the confirmation page names with their provider status.
STREAMS_SHOWN = 20


def streams_acted_on(action: ProviderAction) -> list[Stream]:
    """The streams whose deliveries a confirmation asks for, as the last stream sync read them at the provider:
    the replay's deliveries' streams, or the stream of a re-sent block (a status change states its own). Streams
    the provider has in error or terminated come first: it refuses to deliver for them."""
    if action.kind == ActionKind.SET_STATUS:
        return []
    if action.kind == ActionKind.REPLAY and not action.stream_id:
        streams = Stream.objects.filter(stream_id__in=action.items.values("stream_id"))
    else:
        streams = Stream.objects.filter(stream_id=action.stream_id)
    return list(streams.failing_at_provider_first()[:STREAMS_SHOWN])


def confirm(action: ProviderAction, *, queue: Callable[[int], object], now: datetime | None = None) -> bool:
    """Queue the action once: True for the request that confirmed it, False for a repeat (a double submit).

    `queue(action_id)` starts the run (the caller passes the task's `delay`); it is called after the transaction
    commits."""
    now = now or timezone.now()
    if action.state == ActionState.DRAFT and not action.can_be_confirmed(now):
        _close_draft(action, ActionState.EXPIRED, "Not confirmed in time; nothing was sent.", now)
        raise ActionRefused(
            f"This action was prepared more than {settings.ACTION_CONFIRM_MINUTES} minutes ago and was not "
            "confirmed; prepare it again so the confirmation shows what holds now."
        )
    with transaction.atomic():
        confirmed = ProviderAction.objects.filter(pk=action.pk, state=ActionState.DRAFT).update(
            state=ActionState.QUEUED, confirmed_at=now
        )
        if confirmed:
            transaction.on_commit(lambda: queue(action.pk))
    action.refresh_from_db()
    return bool(confirmed)


def cancel(action: ProviderAction, *, now: datetime | None = None) -> None:
    """Stop a replay: deliveries not yet sent are not sent. One already sent cannot be called back."""
    now = now or timezone.now()
    ProviderAction.objects.filter(pk=action.pk, state__in=[ActionState.QUEUED, ActionState.RUNNING]).update(
        cancel_requested_at=now
    )
    _close_draft(action, ActionState.CANCELLED, "Cancelled before it was confirmed; nothing was sent.", now)
    action.refresh_from_db()


def _close_draft(action: ProviderAction, state: str, why: str, now: datetime) -> None:
    """A draft that will never run: finished, and its deliveries marked as not sent rather than waiting."""
    with transaction.atomic():
        closed = ProviderAction.objects.filter(pk=action.pk, state=ActionState.DRAFT).update(
            state=state, finished_at=now, answer=why
        )
        if closed:
            action.items.filter(state=ItemState.PENDING).update(
                state=ItemState.SKIPPED, answer=f"Not sent: {why[0].lower()}{why[1:]}", answered_at=now
            )


# -- running ------------------------------------------------------------------------------------


@dataclass
class RunOutcome:
    finished: bool
    # Seconds to wait before the next run when not finished (the provider unreachable, or out of time).
    retry_in: float = 0.0


def run_action(
    action_id: int,
    *,
    deadline: float | None = None,
    client: UpstreamClient | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RunOutcome:
    """Carry out a queued action (or continue one a previous run left). Safe to call any number of times."""
    action = ProviderAction.objects.filter(pk=action_id).select_related("source").first()
    if action is None or action.state not in (ActionState.QUEUED, ActionState.RUNNING):
        return RunOutcome(finished=True)
    if action.source is None:
        _finish(action, ActionState.FAILED, "The source of this action was deleted; nothing was sent.")
        return RunOutcome(finished=True)
    ProviderAction.objects.filter(pk=action.pk, state=ActionState.QUEUED).update(
        state=ActionState.RUNNING, started_at=timezone.now()
    )
    if not writes_enabled():
        _skip_pending(action, "Not sent: PROVIDER_WRITES is off.")
        _finish(action, ActionState.CANCELLED, "Not sent: writes to the provider were switched off (PROVIDER_WRITES).")
        return RunOutcome(finished=True)
    client = client or streams_client(action.source)
    deadline = deadline if deadline is not None else time.monotonic() + 3600
    if action.kind in (ActionKind.REPLAY, ActionKind.RESEND_BLOCKS):
        return _run_items(action, client, deadline, sleep)
    if action.kind == ActionKind.SET_STATUS:
        return _run_status_change(action, client)
    return _run_resend(action, client)


def is_finished(action_id: int) -> bool:
    return not ProviderAction.objects.filter(
        pk=action_id, state__in=[ActionState.QUEUED, ActionState.RUNNING]
    ).exists()


def _finish(action: ProviderAction, state: str, answer: str) -> None:
    ProviderAction.objects.filter(pk=action.pk).exclude(
        state__in=[ActionState.DONE, ActionState.PARTIAL, ActionState.FAILED]
    ).update(
        state=state, answer=answer[:4000], finished_at=timezone.now()
    )


def _skip_pending(action: ProviderAction, why: str) -> None:
    action.items.filter(state=ItemState.PENDING).update(
        state=ItemState.SKIPPED, answer=why, answered_at=timezone.now()
    )


def _run_items(
    action: ProviderAction, client: UpstreamClient, deadline: float, sleep: Callable[[float], None]
) -> RunOutcome:
    """The items of a replay (deliveries) or of a re-send (missing blocks), each claimed before its request."""
    resend = action.kind == ActionKind.RESEND_BLOCKS
    reread = _reread_resend if resend else _reread
    # Items a dead worker left mid-request, and lost answers: read again, never send again.
    for item in action.items.filter(
        state__in=[ItemState.SENDING, ItemState.UNKNOWN], rereads__lt=MAX_REREADS
    ).order_by("id"):
        reread(client, item)
    while True:
        if ProviderAction.objects.filter(pk=action.pk, cancel_requested_at__isnull=False).exists():
            _skip_pending(action, "Not sent: cancelled.")
            _finish(action, ActionState.CANCELLED, replay_summary(action) + " Cancelled.")
            return RunOutcome(finished=True)
        if time.monotonic() > deadline:
            return RunOutcome(finished=False, retry_in=1.0)
        next_item = action.items.filter(state=ItemState.PENDING).order_by("id").first()
        if next_item is None:
            break
        item = next_item
        # The moment is recorded before the request goes out: the provider's logs are read from it if the
        # answer is lost.
        claimed = ReplayItem.objects.filter(pk=item.pk, state=ItemState.PENDING).update(
            state=ItemState.SENDING, sent_at=timezone.now()
        )
        if not claimed:
            continue
        try:
            if resend:
                assert item.block_number is not None
                resent = resend_block(client, item.stream_id, item.chain_id, item.block_number)
            else:
                answer = replay_delivery(client, item.stream_id, str(item.delivery_id))
        except errors.RateLimited as exc:
            # Refused, so not sent: waiting and asking again is safe.
            _release(item)
            sleep(min(exc.retry_after or 5.0, MAX_RATE_LIMIT_WAIT))
            continue
        except errors.OutcomeUnknown as exc:
            _answer(item, ItemState.UNKNOWN, exc.message)
            item.refresh_from_db()
            reread(client, item)
            continue
        except (errors.Unreachable, errors.ServerError) as exc:
            # No connection was made (the client tells a lost answer apart): not sent, try again later.
            _release(item)
            ProviderAction.objects.filter(pk=action.pk).update(answer=f"Waiting for the provider: {exc.message}"[:4000])
            return RunOutcome(finished=False, retry_in=30.0)
        except errors.RejectedKey as exc:
            _answer(item, ItemState.REFUSED, exc.message)
            _skip_pending(action, "Not sent: the provider rejected the API key.")
            _finish(action, ActionState.FAILED, f"The provider rejected the API key: {exc.message}")
            return RunOutcome(finished=True)
        except errors.UpstreamError as exc:
            # 400 (stream in error state, malformed id), 404 (not found): the provider refused this one.
            _answer(item, ItemState.REFUSED, refusal(item.stream_id, exc.message))
            continue
        if resend:
            logs = resent.payload.get("logs") if isinstance(resent.payload, dict) else None
            _answer(item, ItemState.REPLAYED, "Re-sent: the provider built the block again and delivered it"
                    + (f" ({len(logs)} logs)." if isinstance(logs, list) else "."))
            continue
        delivered = answer.delivered
        _answer(
            item,
            ItemState.REPLAYED,
            "Delivered." if delivered else f"Attempted, failed again: {answer.error_message or 'no error text'}",
            delivered=delivered,
        )
        _store_answer(action.source, answer.record)
    _finish(action, replay_outcome(action), replay_summary(action))
    return RunOutcome(finished=True)


def replay_outcome(action: ProviderAction) -> str:
    """Done when every delivery was replayed; failed when none was; partly done otherwise (refused, lost)."""
    replayed = action.items.filter(state=ItemState.REPLAYED).count()
    if action.target_count and replayed == 0:
        return ActionState.FAILED
    if replayed < action.target_count:
        return ActionState.PARTIAL
    return ActionState.DONE


def _release(item: ReplayItem) -> None:
    # The provider refused it unseen (429) or no connection was made: it did not act, so no interval to look in.
    ReplayItem.objects.filter(pk=item.pk, state=ItemState.SENDING).update(state=ItemState.PENDING, sent_at=None)


def _answer(item: ReplayItem, state: str, text: str, *, delivered: bool | None = None) -> None:
    ReplayItem.objects.filter(pk=item.pk).update(
        state=state, answer=text[:2000], answered_at=timezone.now(), delivered=delivered
    )


def _store_answer(source: Source | None, record: dict[str, Any]) -> None:
    """The replay's answer is the history record after the attempt: store it like a polled one, so the
    delivery shows the result at once. Without a payload it is left for the next poll (storing it would
    blank the stored payload)."""
    if source is None or not isinstance(record.get("payload"), dict):
        return
    try:
        store_records(source, [record])
    except Exception:  # noqa: BLE001 - the replay happened; the next poll stores the record anyway
        log.exception("could not store the record a replay answered with")


def _reread(client: UpstreamClient, item: ReplayItem) -> None:
    """The answer to this item's replay was lost: look for its attempt in the provider's delivery logs. Found for
    certain, the item is replayed; otherwise it stays "answer lost" and is never sent again (a second request
    could be a second replay): the answer says what the logs showed, for the person who decides."""
    ReplayItem.objects.filter(pk=item.pk).update(rereads=F("rereads") + 1)
    item.refresh_from_db()
    try:
        found = find_replay_attempt(client, item)
    except errors.UpstreamError as exc:
        _answer(item, ItemState.UNKNOWN, f"The answer was lost and the provider's delivery logs could not be read "
                f"({exc.message}); not sent again.")
        return
    if found.attempt is not None:
        attempt = found.attempt
        when = f"{attempt.created_at:%Y-%m-%d %H:%M:%S} UTC" if attempt.created_at else "recently"
        _answer(
            item,
            ItemState.REPLAYED,
            f"The answer was lost; the provider's delivery logs show the attempt ({when}, {attempt.delivery_status}).",
            delivered=attempt.succeeded,
        )
    elif found.ambiguous:
        _answer(item, ItemState.UNKNOWN, "The answer was lost; the provider's delivery logs show an attempt that "
                "could be this replay or one the provider made on its own (a scheduled retry, or a replay of the "
                "block's other delivery); not sent again. Check the delivery before replaying it again.")
    else:
        _answer(item, ItemState.UNKNOWN, "The answer was lost and the provider's delivery logs show no attempt "
                "(yet); not sent again. Check the delivery before replaying it again.")


def _reread_resend(client: UpstreamClient, item: ReplayItem) -> None:
    """The answer to this block's re-send was lost: look in /history (newest first, from the moment the request
    went out) for a delivery of the block to the stream. The block was missing, so the provider made no delivery
    of it on its own: one found is ours, unless another re-send of the same block was out as well and there are
    not as many as those requests. Otherwise the item stays "answer lost" and is never sent again."""
    ReplayItem.objects.filter(pk=item.pk).update(rereads=F("rereads") + 1)
    item.refresh_from_db()
    if item.sent_at is None or item.block_number is None:
        _answer(item, ItemState.UNKNOWN, "The answer was lost before the request's moment was recorded; not sent again.")
        return
    since = item.sent_at - CLOCK_SKEW
    found = []
    try:
        for page in iter_history_pages(client, max_pages=REREAD_HISTORY_PAGES):
            rows = [parse_record(record) for record in page.records]
            found += [row for row in rows if row.stream_id == item.stream_id and row.chain_id == item.chain_id
                      and row.block_number == item.block_number and row.date >= since]
            if rows and min(row.date for row in rows) < since:
                break
    except (errors.UpstreamError, ValueError) as exc:
        text = exc.message if isinstance(exc, errors.UpstreamError) else str(exc)
        _answer(item, ItemState.UNKNOWN, f"The answer was lost and /history could not be read ({text}); not sent "
                "again.")
        return
    rivals = ReplayItem.objects.filter(
        stream_id=item.stream_id, chain_id=item.chain_id, block_number=item.block_number, delivery_id__isnull=True,
        state__in=MAY_HAVE_ACTED, sent_at__gte=since,
    ).exclude(pk=item.pk).count()
    if len(found) > rivals:
        oldest = min(row.date for row in found)
        _answer(item, ItemState.REPLAYED, f"The answer was lost; /history shows the block's delivery "
                f"({oldest:%Y-%m-%d %H:%M:%S} UTC).")
    elif found:
        _answer(item, ItemState.UNKNOWN, "The answer was lost; /history shows a delivery of the block that could be "
                "this re-send's or another's; not sent again.")
    else:
        _answer(item, ItemState.UNKNOWN, "The answer was lost and /history shows no delivery of the block (yet); "
                "not sent again. Check the block before re-sending it.")


@dataclass(frozen=True)
class LogsRead:
    # The log of our replay, when the logs show it for certain.
    attempt: DeliveryLog | None
    # The logs show an attempt that may be ours or may not.
    ambiguous: bool = False


def find_replay_attempt(client: UpstreamClient, item: ReplayItem, *, now: datetime | None = None) -> LogsRead:
    """Whether the provider's logs show this item's replay, read from the moment its request went out.

    A line counts as ours by time (`classify_log`), whatever the provider did with the retry count. Where the
    block's other delivery (or another action) had a replay of ours out in the same interval, the lines are
    ours only if there are as many as those requests: otherwise nobody can say which one the provider acted on."""
    now = now or timezone.now()
    window = replay_window(item, now)
    if window is None or item.block_number is None or item.delivery_date is None:
        return LogsRead(None)
    logs = logs_of_block(
        client,
        stream_id=item.stream_id,
        block_number=item.block_number,
        chain=item.chain_id or None,
        not_before=window.sent_at - CLOCK_SKEW,
        max_pages=REREAD_LOG_PAGES,
    )
    neighbours = block_neighbours(item.delivery_id, item.stream_id, item.chain_id, item.block_number)
    kinds = [
        (entry, classify_log(entry, first_attempt=item.delivery_date, retries=item.retries_before, replays=[window],
                             neighbours=neighbours))
        for entry in logs
    ]
    ours = [entry for entry, kind in kinds if kind is LogKind.OUR_REPLAY]
    unsure = any(kind is LogKind.AMBIGUOUS for _, kind in kinds)
    rivals = ReplayItem.objects.filter(
        stream_id=item.stream_id, chain_id=item.chain_id, block_number=item.block_number,
        state__in=MAY_HAVE_ACTED, sent_at__isnull=False,
    ).exclude(pk=item.pk)
    overlapping = sum(1 for other in rivals if (w := replay_window(other, now)) is not None and w.overlaps(window))
    if len(ours) > overlapping:
        # Logs come newest first: the oldest line of the interval is the one nearest our request.
        return LogsRead(ours[-1])
    return LogsRead(None, ambiguous=bool(ours) or unsure)


def replay_summary(action: ProviderAction) -> str:
    counts = action.items.counts()
    if action.kind == ActionKind.RESEND_BLOCKS:
        parts = [f"{counts.get(ItemState.REPLAYED, 0)} of {action.target_count} blocks re-sent"]
    else:
        parts = [f"{counts.get(ItemState.REPLAYED, 0)} of {action.target_count} replayed"]
        parts.append(f"{action.items.delivered().count()} delivered")
    for state, label in ((ItemState.REFUSED, "refused"), (ItemState.UNKNOWN, "answer lost"),
                         (ItemState.SKIPPED, "not sent")):
        if counts.get(state):
            parts.append(f"{counts[state]} {label}")
    return ", ".join(parts) + "."


def _run_status_change(action: ProviderAction, client: UpstreamClient) -> RunOutcome:
    kind: StreamKind = (
        "aptos" if Stream.objects.filter(stream_id=action.stream_id, provider_kind="aptos").exists() else "evm"
    )
    if action.sent_at is None:
        claimed = ProviderAction.objects.filter(pk=action.pk, sent_at__isnull=True).update(sent_at=timezone.now())
        if not claimed:
            return RunOutcome(finished=True)
        try:
            change = set_stream_status(client, action.stream_id, action.wanted_status,  # type: ignore[arg-type]
                                       kind=kind)
        except errors.OutcomeUnknown:
            return _reread_status(action, client, kind)
        except errors.UpstreamError as exc:
            return _not_acted_on(action, exc)
        status = change.status or action.wanted_status
        message = change.status_message or ""
        _record_stream_status(action, status, message)
        _finish(action, ActionState.DONE, f"The provider answered: {status}" + (f" — {message}" if message else ""))
        return RunOutcome(finished=True)
    # A previous run sent it and died before recording the answer.
    return _reread_status(action, client, kind)


def _not_acted_on(action: ProviderAction, exc: errors.UpstreamError) -> RunOutcome:
    """A single request (status change, re-sent block) the provider did not act on: a 429 or an unreachable
    host is asked again later (released for the next run); anything else is its refusal, recorded."""
    if isinstance(exc, errors.RateLimited):
        ProviderAction.objects.filter(pk=action.pk).update(sent_at=None)
        return RunOutcome(finished=False, retry_in=min(exc.retry_after or 5.0, MAX_RATE_LIMIT_WAIT))
    if isinstance(exc, (errors.Unreachable, errors.ServerError)):
        ProviderAction.objects.filter(pk=action.pk).update(sent_at=None, answer=f"Waiting: {exc.message}"[:4000])
        return RunOutcome(finished=False, retry_in=30.0)
    _finish(action, ActionState.FAILED, f"The provider refused: {refusal(action.stream_id, exc.message)}")
    return RunOutcome(finished=True)


def _reread_status(action: ProviderAction, client: UpstreamClient, kind: StreamKind) -> RunOutcome:
    try:
        stream = fetch_stream(client, action.stream_id, kind=kind)
    except errors.UpstreamError as exc:
        _finish(action, ActionState.FAILED, "The answer was lost and the stream could not be read again "
                f"({exc.message}); not sent again. Check the stream's status before trying again.")
        return RunOutcome(finished=True)
    _record_stream_status(action, stream.status or "", stream.status_message or "")
    if stream.status == action.wanted_status:
        _finish(action, ActionState.DONE, f"The answer was lost; the stream reads {stream.status} now.")
    else:
        _finish(action, ActionState.FAILED, f"The answer was lost and the stream reads {stream.status or 'unknown'}, "
                "not what was asked; not sent again.")
    return RunOutcome(finished=True)


def _record_stream_status(action: ProviderAction, status: str, message: str) -> None:
    rows = Stream.objects.filter(source=action.source, stream_id=action.stream_id)
    rows.record_provider_status(status, message, timezone.now())


def _run_resend(action: ProviderAction, client: UpstreamClient) -> RunOutcome:
    claimed = ProviderAction.objects.filter(pk=action.pk, sent_at__isnull=True).update(sent_at=timezone.now())
    if not claimed:
        _finish(action, ActionState.FAILED, "A previous run sent this request and its answer was lost; "
                "not sent again. Look for the block's delivery in the history.")
        return RunOutcome(finished=True)
    assert action.block_number is not None
    try:
        resent = resend_block(client, action.stream_id, action.chain_id, action.block_number)
    except errors.OutcomeUnknown as exc:
        _finish(action, ActionState.FAILED, f"{exc.message}. Not sent again: look for the block's delivery in the history.")
        return RunOutcome(finished=True)
    except errors.UpstreamError as exc:
        return _not_acted_on(action, exc)
    logs = resent.payload.get("logs") if isinstance(resent.payload, dict) else None
    _finish(action, ActionState.DONE, f"The provider built block {resent.block_number} again and delivered it"
            + (f" ({len(logs)} logs)." if isinstance(logs, list) else "."))
    return RunOutcome(finished=True)
