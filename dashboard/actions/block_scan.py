"""Finding a window's missing blocks: each block of the window's range on each of the stream's chains previewed once
with the stream's configuration, and compared with the stored history.

The preview is a read (it changes nothing at the provider) but it costs like a history page, so it is run like an
action: a row before any request (`BlockScan`, DRAFT, with the number of previews it will cost), confirmed by a
conditional UPDATE, carried out by a worker holding the scan's lease (tasks.run_block_scan_task) within
BLOCK_PREVIEW_PER_REQUEST (refused when preparing) and BLOCK_PREVIEW_PER_DAY (counted from the `PreviewedBlock`
rows of the UTC day; a scan meeting it waits for the next day).

Each block once: a preview's answer is written as a `PreviewedBlock` row (unique on scan, chain and block) in the
same transaction that moves the chain's cursor past it, guarded by the cursor's old value. A run keeps up to
PREVIEWS_IN_FLIGHT requests going (the next blocks' previews while it records one: `_Previews`), so it goes at the
provider's pace rather than one answer's latency at a time. A worker killed before a commit leaves the cursor on
the block, and the next run previews again that block and the ones that were in flight (reads; the only repeats a
kill or a failed preview can cause, at most PREVIEWS_IN_FLIGHT); a worker killed after it resumes at the next
block. A 429 with a Retry-After of at most SHORT_RETRY_AFTER holds every request back that long inside the run; a
longer one is not waited out in the worker: the scan is re-queued after its Retry-After.

Missing = previewed with something matched, and no delivery of that block to the stream stored
(deliveries/completeness.received_blocks): read when asked, so a late poll or a re-send takes a block off the list.
`missing_blocks` answers it for one scan (the window page), `missing_found_since` for every stream's previews of a
period (the `missing_blocks` alert condition); both through `_missing`.

The completeness audit (actions/audit.py) is a scan too: a window of kind `audit`, queued without a draft (its
budget is a setting), whose chains hold a sample of blocks instead of a whole range (`BlockScanChain.sample`). It
runs through the same loop, the same checkpoint and the same day's budget; meeting that budget it stops for good
(a sample not taken is not owed) where a person's scan waits for the next day.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from dashboard.actions.models import (
    ACT_AT_PROVIDER,
    SCAN_LIVE,
    BlockScan,
    BlockScanChain,
    ItemState,
    PreviewBudget,
    PreviewedBlock,
    ScanState,
)
from dashboard.deliveries.completeness import (
    WindowRefused,
    chain_ranges,
    delivered_after,
    received_blocks,
)
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.sources.clients import scan_client
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.streams import StreamConfig, fetch_stream, fetch_stream_addresses, preview_block

log = logging.getLogger(__name__)

# An open window is scanned up to this long before now: younger blocks' deliveries may not be polled yet.
SETTLE = timedelta(minutes=5)
# How often (in previews) a running scan looks for a cancellation.
CANCEL_CHECK_EVERY = 20
# Previews a run has in flight at once: enough to keep a provider with ~100 ms answers busy at a few tens a second,
# few enough not to crowd out the polls sharing its rate limit.
PREVIEWS_IN_FLIGHT = 4
# The longest 429 Retry-After a run waits out itself (holding back every request that long); a longer one re-queues
# the scan after it.
SHORT_RETRY_AFTER = 2.0


def can_scan(user: Any) -> bool:
    """A scan writes nothing at the provider (PROVIDER_WRITES does not stop it) but spends its budget: staff with
    the permission to act there may."""
    return bool(user.is_authenticated and user.is_active and user.has_perm(ACT_AT_PROVIDER))


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def budget_left(now: datetime | None = None) -> int:
    """Previews left of today's BLOCK_PREVIEW_PER_DAY (UTC): what the day's ledger has not handed out."""
    start = day_start(now or timezone.now())
    budget = PreviewBudget.objects.filter(day=start.date()).first()
    spent = budget.spent if budget else PreviewedBlock.objects.since(start).count()
    return max(0, int(settings.BLOCK_PREVIEW_PER_DAY) - spent)


def take_previews(wanted: int, now: datetime) -> int:
    """Take up to `wanted` previews of today's budget for requests about to go out: the number granted (0: spent).
    The day's ledger row is locked while it is read and moved on, so runs at once share one budget; a day's row
    starts from the previews recorded that day (those made before the ledger existed)."""
    start = day_start(now)
    with transaction.atomic():
        budget = PreviewBudget.objects.select_for_update().filter(day=start.date()).first()
        if budget is None:
            PreviewBudget.objects.bulk_create(
                [PreviewBudget(day=start.date(), spent=PreviewedBlock.objects.since(start).count())],
                ignore_conflicts=True)
            budget = PreviewBudget.objects.select_for_update().get(day=start.date())
        granted = max(0, min(wanted, int(settings.BLOCK_PREVIEW_PER_DAY) - budget.spent))
        if granted:
            PreviewBudget.objects.filter(day=budget.day).update(spent=F("spent") + granted)
    return granted


def give_back_previews(count: int, day: datetime) -> None:
    """Return previews taken for requests that never went out (a run ending with some of its share unused)."""
    if count > 0:
        PreviewBudget.objects.filter(day=day_start(day).date()).update(spent=Greatest(F("spent") - count, 0))


class _Allowance:
    """A run's share of the day's budget: taken a few previews at a time (one locked update per few requests), each
    spent when its request is submitted; what is left when the run ends goes back."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._held = 0
        self._day = now()

    def spend(self) -> bool:
        if self._held == 0:
            self._held = take_previews(max(1, PREVIEWS_IN_FLIGHT), self._now())
            self._day = self._now()
        if self._held == 0:
            return False
        self._held -= 1
        return True

    def give_back(self) -> None:
        give_back_previews(self._held, self._day)
        self._held = 0


# -- preparing, confirming, cancelling ---------------------------------------------------------------


def prepare_scan(user: Any, window: OutageWindow, *, now: datetime | None = None) -> BlockScan:
    """A DRAFT scan of the window with its ranges and cost, or WindowRefused saying why not."""
    now = now or timezone.now()
    if window.kind == WindowKind.AUDIT:
        raise WindowRefused("This is a completeness audit's sample of a day, not an outage: to search a stretch of it "
                            "block by block, mark a window.")
    stream = Stream.objects.select_related("source").get(pk=window.stream_id)
    live = BlockScan.objects.filter(window=window, state__in=[ScanState.DRAFT, *SCAN_LIVE]).first()
    if live is not None and not (live.state == ScanState.DRAFT and not live.can_be_confirmed(now)):
        raise WindowRefused("A scan of this window is already prepared or under way; see it below.")
    oldest = now - timedelta(days=int(settings.HISTORY_RETENTION_DAYS))
    if window.end is not None and window.end < oldest:
        raise WindowRefused("This window ended before the oldest history kept here: there is nothing to compare with.")
    # Blocks count as received once a delivery of them is stored: only blocks whose deliveries the poll has had time
    # to store (SETTLE before its last success) can be called missing, else a re-send would deliver them twice.
    # Polled up to: every record dated up to `synced_through` is stored, and a poll that succeeded found nothing newer
    # than its moment (a quiet source's records stop early).
    source = stream.source
    marks = [m for m in (source.synced_through, source.last_success_at) if m is not None]
    if not marks:
        raise WindowRefused("This stream's source has not been polled yet: there is no history to compare with.")
    polled = max(marks)
    settled = min(now, polled) - SETTLE
    end = window.end if window.end is not None else settled
    if end > settled or end <= window.start:
        wait = max(1, math.ceil((end - settled).total_seconds() / 60)) if end > settled else int(
            SETTLE.total_seconds() // 60)
        raise WindowRefused(
            f"This window is too recent: its blocks' deliveries may not be polled yet (the last poll was "
            f"{polled:%Y-%m-%d %H:%M:%S} UTC). Try again in {wait} minute{'s' if wait != 1 else ''}, after a poll."
        )
    ranges = chain_ranges(stream, window.start, end, now=now)
    planned = sum(r.blocks for r in ranges)
    cap = int(settings.BLOCK_PREVIEW_PER_REQUEST)
    if planned > cap:
        raise WindowRefused(
            f"Finding this window's missing blocks would cost {planned:,} previews, more than one scan may spend "
            f"(BLOCK_PREVIEW_PER_REQUEST, {cap:,}). Mark a shorter window."
        )
    with transaction.atomic():
        scan = BlockScan.objects.create(
            window=window, source=stream.source, stream_id=stream.stream_id, requested_by=user,
            requested_by_name=user.get_username(), planned=planned, created_at=now,
        )
        BlockScanChain.objects.bulk_create(
            BlockScanChain(scan=scan, chain_id=r.chain_id, first_block=r.first, last_block=r.last,
                           next_block=r.first, placed_by=r.placed_by[:200])
            for r in ranges
        )
    return scan


def confirm_scan(scan: BlockScan, *, queue: Callable[[int], object], now: datetime | None = None) -> bool:
    """Queue the scan once (a double submit confirms nothing more); `queue(scan_id)` runs after commit."""
    now = now or timezone.now()
    if scan.state == ScanState.DRAFT and not scan.can_be_confirmed(now):
        BlockScan.objects.filter(pk=scan.pk, state=ScanState.DRAFT).update(
            state=ScanState.EXPIRED, finished_at=now, message="Not confirmed in time; nothing was previewed.")
        raise WindowRefused("This scan was prepared too long ago; prepare it again so its cost is what holds now.")
    with transaction.atomic():
        confirmed = BlockScan.objects.filter(pk=scan.pk, state=ScanState.DRAFT).update(
            state=ScanState.QUEUED, confirmed_at=now)
        if confirmed:
            transaction.on_commit(lambda: queue(scan.pk))
    scan.refresh_from_db()
    return bool(confirmed)


def cancel_scan(scan: BlockScan, *, now: datetime | None = None) -> None:
    """Stop a scan: a draft never runs; a running one stops before its next preview (what it found stays)."""
    now = now or timezone.now()
    BlockScan.objects.filter(pk=scan.pk, state=ScanState.DRAFT).update(
        state=ScanState.CANCELLED, finished_at=now, message="Cancelled before it was confirmed; nothing was previewed.")
    BlockScan.objects.filter(pk=scan.pk, state__in=SCAN_LIVE).update(cancel_requested_at=now)
    # Waiting (for a 429, for tomorrow) or queued: nothing to interrupt, so it stops now.
    _finish_cancelled(scan.pk, states=(ScanState.QUEUED, ScanState.WAITING))
    scan.refresh_from_db()


def _finish_cancelled(scan_id: int, *, states: tuple[str, ...] = (ScanState.RUNNING,)) -> None:
    scan = BlockScan.objects.get(pk=scan_id)
    BlockScan.objects.filter(pk=scan_id, state__in=states, cancel_requested_at__isnull=False).update(
        state=ScanState.CANCELLED, finished_at=timezone.now(),
        message=f"Cancelled after {scan.previewed:,} of {scan.planned:,} previews; what they found is listed.")


# -- running ------------------------------------------------------------------------------------------


@dataclass
class ScanOutcome:
    finished: bool
    # Seconds before the next run when not finished (a 429's Retry-After, the provider away, tomorrow's budget).
    retry_in: float = 0.0


def is_finished(scan_id: int) -> bool:
    return not BlockScan.objects.filter(pk=scan_id, state__in=SCAN_LIVE).exists()


def run_scan(scan_id: int, *, deadline: float | None = None, client: UpstreamClient | None = None,
             now: Callable[[], datetime] = timezone.now) -> ScanOutcome:
    """Preview the scan's blocks from where it stands. Safe to call any number of times."""
    deadline = deadline if deadline is not None else time.monotonic() + 3600
    previews = _Previews(deadline)
    allowance = _Allowance(now)
    try:
        outcome = _run_scan(scan_id, previews, allowance, deadline=deadline, client=client, now=now)
    except Exception:
        previews.close(record=None)
        allowance.give_back()
        raise
    except BaseException:
        # A kill (or what a test makes look like one): nothing more is written or waited for.
        previews.close(record=None, wait=False)
        raise
    previews.close(record=lambda scan, chain, number, preview: _checkpoint(scan, chain, number, preview, now()))
    allowance.give_back()
    return outcome


def _run_scan(scan_id: int, previews: _Previews, allowance: _Allowance, *, deadline: float,
              client: UpstreamClient | None, now: Callable[[], datetime]) -> ScanOutcome:
    scan = BlockScan.objects.select_related("source", "window").filter(pk=scan_id).first()
    if scan is None or scan.state not in SCAN_LIVE:
        return ScanOutcome(finished=True)
    if scan.cancel_requested_at is not None:
        _finish_cancelled(scan.pk, states=SCAN_LIVE)
        return ScanOutcome(finished=True)
    if scan.source is None:
        _end(scan, ScanState.FAILED, "The source of this scan was deleted; nothing more was previewed.")
        return ScanOutcome(finished=True)
    BlockScan.objects.filter(pk=scan.pk, state__in=[ScanState.QUEUED, ScanState.WAITING]).update(
        state=ScanState.RUNNING, started_at=F("started_at") if scan.started_at else now())
    client = client or scan_client(scan.source)
    try:
        config = _config(scan, client)
    except errors.UpstreamError as exc:
        return _not_now(scan, exc)
    count = 0
    for chain in scan.chains.order_by("chain_id"):
        known = _previewed_before(scan, chain)
        for number in chain.pending():
            if number in known and not previews.has_asked(number):
                # Previewed for this stream by another scan or audit: its answer stands, the block is not asked again.
                if not _checkpoint(scan, chain, number, known[number], now()):
                    return ScanOutcome(finished=True)
                count += 1
                continue
            if count % CANCEL_CHECK_EVERY == 0 and BlockScan.objects.filter(
                pk=scan.pk, cancel_requested_at__isnull=False
            ).exists():
                _finish_cancelled(scan.pk)
                return ScanOutcome(finished=True)
            if time.monotonic() > deadline:
                return ScanOutcome(finished=False, retry_in=1.0)
            spent = not previews.has_asked(number) and not allowance.spend()
            if spent and scan.window.kind == WindowKind.AUDIT:
                scan.refresh_from_db()
                _end(scan, ScanState.DONE, f"Stopped: today's preview budget (BLOCK_PREVIEW_PER_DAY, "
                     f"{settings.BLOCK_PREVIEW_PER_DAY:,}) is spent, after {scan.previewed:,} of {scan.planned:,} "
                     f"sampled blocks; the rest of this sample is not audited. {_found(scan)}")
                return ScanOutcome(finished=True)
            if spent:
                moment = now()
                tomorrow = day_start(moment) + timedelta(days=1)
                _wait(scan, f"Today's preview budget (BLOCK_PREVIEW_PER_DAY, {settings.BLOCK_PREVIEW_PER_DAY:,}) is "
                      f"spent; it continues after {tomorrow:%Y-%m-%d %H:%M} UTC.")
                return ScanOutcome(finished=False, retry_in=(tomorrow - moment).total_seconds() + 1)
            try:
                preview = previews.get(scan, chain, number, client, config, allowance=allowance, known=known)
            except errors.UpstreamError as exc:
                return _not_now(scan, exc, block=number)
            if not _checkpoint(scan, chain, number, preview, now()):
                # Another run moved this cursor (two workers despite the lease): it carries on, this one stops.
                return ScanOutcome(finished=True)
            count += 1
    scan.refresh_from_db()
    _end(scan, ScanState.DONE, f"{scan.previewed:,} blocks previewed; {_found(scan)}")
    return ScanOutcome(finished=True)


class _Previews:
    """The previews of a run, up to PREVIEWS_IN_FLIGHT requests at once: asked for a block, it sends the requests
    for it and for the chain's next blocks (no more than the day's budget has left), and hands out their answers
    in block order, so the run records each in its own transaction as before while the provider works on the next
    ones. A 429 whose Retry-After is at most SHORT_RETRY_AFTER seconds holds back every request that long and is
    asked again; a longer one ends the run as before (re-queued after it).

    Each block is asked once per run. When the run stops (its time budget, a cancellation, the budget), the answers
    of the requests still in flight are recorded after it, in order; a preview that failed leaves the answers of
    the blocks after it unrecorded (at most PREVIEWS_IN_FLIGHT - 1 blocks asked again by the next run), and so
    does a killed worker (the requests it had in flight)."""

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._not_before = 0.0
        self._chain: BlockScanChain | None = None
        self._scan: BlockScan | None = None
        self._upcoming: Iterator[int] = iter(())
        self._asked: dict[int, Future[Any]] = {}
        self._failed = False

    def has_asked(self, number: int) -> bool:
        return number in self._asked

    def get(self, scan: BlockScan, chain: BlockScanChain, number: int, client: UpstreamClient, config: StreamConfig,
            *, allowance: _Allowance, known: Container[int] = ()) -> Any:
        if chain is not self._chain:
            # The previous chain's blocks were all handed out: nothing of it is in flight. Blocks previewed for the
            # stream before (`known`) are never asked.
            self._scan, self._chain = scan, chain
            self._upcoming = (n for n in chain.pending() if n > number and n not in known)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, PREVIEWS_IN_FLIGHT), thread_name_prefix="block-preview")
        if number not in self._asked:
            self._asked[number] = self._pool.submit(self._ask, client, chain.chain_id, number, config)
        while len(self._asked) < max(1, PREVIEWS_IN_FLIGHT):
            following = next(self._upcoming, None)
            if following is None:
                break
            if not allowance.spend():
                # The day's budget is spent: the run stops at this block, which is asked no more.
                self._upcoming = itertools.chain([following], self._upcoming)
                break
            self._asked[following] = self._pool.submit(self._ask, client, chain.chain_id, following, config)
        future = self._asked.pop(number)
        try:
            return future.result()
        except BaseException:
            self._failed = True
            raise

    def _ask(self, client: UpstreamClient, chain_id: str, number: int, config: StreamConfig) -> Any:
        while True:
            wait = self._not_before - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                return preview_block(client, chain_id, number, config)
            except errors.RateLimited as exc:
                retry = exc.retry_after
                if retry is None or retry > SHORT_RETRY_AFTER or time.monotonic() + retry > self._deadline:
                    raise
                with self._lock:
                    self._not_before = max(self._not_before, time.monotonic() + retry)

    def close(self, *, record: Callable[[BlockScan, BlockScanChain, int, Any], bool] | None,
              wait: bool = True) -> None:
        """At the end of the run: record the answers still in flight in block order (`record`, the checkpoint;
        None drops them), then stop the requests' threads (waiting for them unless `wait` is False)."""
        asked, self._asked = self._asked, {}
        if record is not None and not self._failed and self._scan is not None and self._chain is not None:
            for number in sorted(asked):
                try:
                    preview = asked[number].result()
                except errors.UpstreamError:
                    break
                if not record(self._scan, self._chain, number, preview):
                    break
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None


def _found(scan: BlockScan) -> str:
    return (f"the stream matched something in {scan.matched:,}; {len(missing_blocks(scan)):,} of those have no "
            "stored delivery.")


def _config(scan: BlockScan, client: UpstreamClient) -> StreamConfig:
    """The stream's configuration with its addresses, read once at the start and kept on the row, so a resumed
    scan asks every block with the same."""
    if scan.config is None:
        stream = fetch_stream(client, scan.stream_id)
        config = stream.config.with_addresses(fetch_stream_addresses(client, scan.stream_id))
        body = config.as_body()
        BlockScan.objects.filter(pk=scan.pk, config__isnull=True).update(config=body)
        scan.refresh_from_db(fields=["config"])
    return StreamConfig.parse(scan.config or {}).with_addresses((scan.config or {}).get("addresses") or [])


@dataclass(frozen=True)
class _Answered:
    """An earlier preview's answer for a block that matched, as `_checkpoint` reads an upstream answer."""

    records: int
    block_timestamp: datetime | None


def _previewed_before(scan: BlockScan, chain: BlockScanChain) -> dict[int, _Answered | None]:
    """The blocks of the chain's range (or sample) previewed for the same stream by another scan or audit, with their
    answers (None: nothing matched): each block of a stream is asked of the provider once."""
    rows = PreviewedBlock.objects.filter(
        scan__stream_id=scan.stream_id, chain_id=chain.chain_id, block_number__gte=chain.next_block,
        block_number__lte=max(chain.sample) if chain.sample else chain.last_block,
    ).exclude(scan=scan).values_list("block_number", "matched", "records", "block_time")
    return {n: _Answered(records, block_time) if matched else None for n, matched, records, block_time in rows}


def _checkpoint(scan: BlockScan, chain: BlockScanChain, number: int, preview: Any, moment: datetime) -> bool:
    matched = preview is not None
    with transaction.atomic():
        # Not waiting for the WAL flush halves a checkpoint on a busy disk. What it risks is a database crash
        # losing the last ~0.6 s of checkpoints (never a worker's kill): those blocks are asked again, a read.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        # The cursor stands on the block, or before it where a sample skips blocks.
        moved = BlockScanChain.objects.filter(pk=chain.pk, next_block__lte=number).update(next_block=number + 1)
        if not moved:
            return False
        PreviewedBlock.objects.create(
            scan=scan, chain_id=chain.chain_id, block_number=number, matched=matched,
            records=preview.records if matched else 0,
            block_time=preview.block_timestamp if matched else None, previewed_at=moment,
        )
        BlockScan.objects.filter(pk=scan.pk).update(previewed=F("previewed") + 1, matched=F("matched") + int(matched))
    return True


def _not_now(scan: BlockScan, exc: errors.UpstreamError, *, block: int | None = None) -> ScanOutcome:
    if isinstance(exc, errors.RateLimited):
        wait = max(1.0, exc.retry_after or 5.0)
        _wait(scan, f"The provider asked to slow down (429); continuing after {wait:g} s.")
        return ScanOutcome(finished=False, retry_in=wait)
    if exc.transient:
        _wait(scan, f"Waiting for the provider: {exc.message}")
        return ScanOutcome(finished=False, retry_in=30.0)
    where = f" at block {block}" if block is not None else ""
    _end(scan, ScanState.FAILED, f"The provider refused{where}: {exc.message}")
    return ScanOutcome(finished=True)


def _wait(scan: BlockScan, message: str) -> None:
    BlockScan.objects.filter(pk=scan.pk, state=ScanState.RUNNING).update(state=ScanState.WAITING, message=message[:2000])


def _end(scan: BlockScan, state: str, message: str) -> None:
    BlockScan.objects.filter(pk=scan.pk, state__in=SCAN_LIVE).update(
        state=state, finished_at=timezone.now(), message=message[:2000])


# -- what a scan found --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MissingBlock:
    chain_id: str
    block_number: int
    records: int
    block_time: datetime | None
    # The scan that found it and the window it belongs to (the page to re-send it from).
    scan_id: int | None = None
    window_id: int | None = None
    previewed_at: datetime | None = None


def missing_blocks(scan: BlockScan) -> list[MissingBlock]:
    """The blocks the stream matched and of which no delivery is stored now, oldest first."""
    return _missing(scan.stream_id, scan.blocks.filter(matched=True).select_related("scan"))


def missing_found_since(since: datetime, stream_ids: Iterable[str] | None = None) -> dict[str, list[MissingBlock]]:
    """Per stream, the blocks a scan or an audit previewed since `since` that the stream matched and of which no
    delivery is stored now (a block found twice counted once, the latest finding kept)."""
    rows = PreviewedBlock.objects.since(since).filter(matched=True).select_related("scan")
    if stream_ids is not None:
        rows = rows.filter(scan__stream_id__in=list(stream_ids))
    by_stream: dict[str, list[PreviewedBlock]] = {}
    for row in rows.order_by("previewed_at", "id"):
        by_stream.setdefault(row.scan.stream_id, []).append(row)
    found = {stream_id: _missing(stream_id, previews) for stream_id, previews in sorted(by_stream.items())}
    return {stream_id: blocks for stream_id, blocks in found.items() if blocks}


def _missing(stream_id: str, rows: Iterable[PreviewedBlock]) -> list[MissingBlock]:
    """Of the matched previews `rows` of one stream, the blocks of which no delivery to it is stored, by chain and
    block, each once: the one home of "missing"."""
    matched: dict[str, dict[int, PreviewedBlock]] = {}
    for row in rows:
        matched.setdefault(row.chain_id, {})[row.block_number] = row
    out: list[MissingBlock] = []
    for chain in sorted(matched):
        received = received_blocks(stream_id, chain, matched[chain])
        out.extend(MissingBlock(chain, n, r.records, r.block_time, r.scan_id, r.scan.window_id, r.previewed_at)
                   for n, r in sorted(matched[chain].items()) if n not in received)
    return out


@dataclass(frozen=True)
class Recovery:
    """What the re-sends of a scan's missing blocks brought back: `recovered` of `asked` blocks have a stored
    delivery dated after their re-send went out; `still_missing` names the others."""

    asked: int
    recovered: int
    still_missing: list[tuple[str, int, str]]

    @property
    def complete(self) -> bool:
        return self.asked > 0 and self.recovered == self.asked


def recovery(scan: BlockScan) -> Recovery | None:
    """The verification of the scan's re-sends, from stored deliveries; None before any re-send was confirmed."""
    from dashboard.actions.models import ActionState, ReplayItem

    items = list(
        ReplayItem.objects.filter(action__scan=scan, delivery_id__isnull=True)
        .exclude(action__state__in=[ActionState.DRAFT, ActionState.EXPIRED])
        .order_by("chain_id", "block_number", "id")
    )
    if not items:
        return None
    blocks: dict[tuple[str, int], ReplayItem] = {}
    for item in items:
        if item.block_number is not None:
            # The latest request for a block (a later action after a refusal) is the one that counts.
            blocks[(item.chain_id, item.block_number)] = item
    sent = [(c, b, i.sent_at) for (c, b), i in blocks.items() if i.sent_at is not None]
    back = delivered_after(scan.stream_id, sent)
    still = [
        (chain, block, item.get_state_display() if item.state != ItemState.REPLAYED else "re-sent, not in the history yet")
        for (chain, block), item in sorted(blocks.items()) if (chain, block) not in back
    ]
    return Recovery(asked=len(blocks), recovered=len(blocks) - len(still), still_missing=still)
