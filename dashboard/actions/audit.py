"""The completeness audit: silent loss caught without an outage. Once a day, for each stream the provider has
`active`, a small random sample of the previous UTC day's final blocks is previewed with the stream's configuration;
a sampled block the stream matched and of which no delivery is stored is missing, like a scan's.

An audit is a block scan (actions/block_scan.py), not a second mechanism: a window of kind `audit` over the sampled
stretch (one per stream and day, a unique constraint), and a `BlockScan` queued at once (no draft: its budget is the
setting COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY, 0 turns it off) whose chains hold the sampled blocks
(`BlockScanChain.sample`). So it previews through the scan's loop and checkpoint (each block once, a killed worker
resumes at the next block, a 429 comes back after its Retry-After), within the same BLOCK_PREVIEW_PER_DAY (its
previews are `PreviewedBlock` rows like any scan's), and its findings are the window page's: the missing blocks,
their re-send and "Recovered N of N". The `missing_blocks` alert condition reads them with the scans' findings.

What is sampled, per stream:
- the previous UTC day, from the stream's first stored delivery on (before it the stream may not have existed),
  audited once the whole day is older than SETTLE plus the slowest finality of the stream's chains, before now and
  before the source's last poll: every sampled block's deliveries, the confirmed one too, have been made and polled;
- leaving out the stream's maintenance windows (it owes nothing then) and its outage windows (a provider status, a
  marked reload: those stretches are searched whole by a scan);
- leaving out blocks any scan or audit of the stream previewed already, and the ranges of its scans not finished:
  each block is previewed at most once per stream. (A scan, in turn, previews every block of its window even if an
  audit sampled one: its account of the window must be whole, and outage windows are outside the sample anyway.)
- Each allowed stretch is placed on each chain like a scan's window (`chain_ranges`, from stored block times), then
  narrowed by two blocks on each side, so that a sampled block lies inside it whatever the placing's error.

Skipped, with the reason logged and returned (the stream page says why for its stream, `skip_reason`): Aptos streams
(no block preview), streams whose chains are unknown or unplaced, streams not active at the provider, streams with no
stored delivery yet, and every stream while today's preview budget is spent (tried again at the next run, hourly).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.actions.block_scan import SETTLE, budget_left, day_start
from dashboard.actions.models import (
    SCAN_FINISHED,
    SCAN_LIVE,
    BlockScan,
    BlockScanChain,
    PreviewedBlock,
    ScanState,
)
from dashboard.deliveries.completeness import (
    ACTIVE,
    MARGIN_BLOCKS,
    WindowRefused,
    chain_ranges,
    check_previewable,
)
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.expectations.maintenance import Target, intervals
from dashboard.upstream.chains import find_chain

log = logging.getLogger(__name__)

AUDIT_BY = "completeness audit"
# A sampled block lies this many blocks inside its placed stretch (the placing adds MARGIN_BLOCKS outside it).
INSET_BLOCKS = MARGIN_BLOCKS + 1
# An audit whose task was lost (queued or previewing, untouched this long) is queued again by the next run.
LOST_AFTER = timedelta(hours=1)
# A day of a fast chain is many blocks; they are only counted, never listed, so the scans' cap does not apply.
MAX_DAY_BLOCKS = 10_000_000


@dataclass
class AuditRun:
    """What one run of the planner did: the scans it queued and the streams it skipped, with why."""

    queued: list[int] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def audited_day(now: datetime) -> tuple[datetime, datetime]:
    """The day an audit at `now` samples: the previous UTC day."""
    end = day_start(now)
    return end - timedelta(days=1), end


def skip_reason(stream: Stream) -> str:
    """Why the audit leaves this stream out whatever the day, or "" when it samples it."""
    if int(settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY) <= 0:
        return "The completeness audit is off (COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY is 0)."
    try:
        check_previewable(stream)
    except WindowRefused as exc:
        return f"Not audited: {exc}"
    if stream.provider_status and stream.provider_status != ACTIVE:
        return f"Not audited while the provider has it {stream.provider_status}: that is an outage window's matter."
    if stream.first_delivery_at is None:
        return "Not audited yet: no delivery of this stream is stored, nothing to compare a preview with."
    return ""


def plan_audits(
    now: datetime | None = None,
    *,
    queue: Callable[[int], object],
    rng: random.Random | None = None,
    period: tuple[datetime, datetime] | None = None,
    stream_ids: list[str] | None = None,
) -> AuditRun:
    """Make today's audit of each active stream not audited yet, and queue its scan after commit (`queue(scan_id)`).
    Idempotent: a stream already audited for the period is left alone; an audit whose task was lost is queued again.
    `period`: the stretch to sample instead of the previous UTC day; `stream_ids`: only these streams."""
    now = now or timezone.now()
    rng = rng or random.SystemRandom()
    run = AuditRun()
    per_stream = int(settings.COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY)
    _queue_lost(now, queue, run)
    if per_stream <= 0:
        return run
    start, end = period or audited_day(now)
    streams = Stream.objects.filter(source__enabled=True).select_related("source")
    # Streams named are each answered (a skip says why); otherwise only those the provider has active are looked at.
    streams = streams.filter(stream_id__in=stream_ids) if stream_ids is not None else streams.active_at_provider()
    for stream in streams.order_by("stream_id"):
        reason = skip_reason(stream) or _plan_one(stream, start, end, now, per_stream, rng, queue, run)
        if reason:
            run.skipped[stream.stream_id] = reason
            log.info("completeness audit skips stream %s: %s", stream.stream_id, reason)
    return run


def _queue_lost(now: datetime, queue: Callable[[int], object], run: AuditRun) -> None:
    lost = BlockScan.objects.filter(
        window__kind=WindowKind.AUDIT, state__in=SCAN_LIVE, created_at__lt=now - LOST_AFTER
    ).values_list("pk", flat=True)
    for pk in lost:
        # A copy still at work holds the scan's lease: the task re-queued here finds it held and looks later.
        queue(pk)
        run.queued.append(pk)


def _plan_one(stream: Stream, start: datetime, end: datetime, now: datetime, per_stream: int,
              rng: random.Random, queue: Callable[[int], object], run: AuditRun) -> str:
    """Make and queue one stream's audit; the reason when there is none."""
    if OutageWindow.objects.filter(stream=stream, kind=WindowKind.AUDIT, start=start).exists():
        return ""
    if budget_left(now) <= 0:
        return (f"Today's preview budget (BLOCK_PREVIEW_PER_DAY, {settings.BLOCK_PREVIEW_PER_DAY:,}) is spent; "
                "the audit tries again at its next run.")
    assert stream.first_delivery_at is not None  # skip_reason
    chains = check_previewable(stream)
    finality = max((c.finality_seconds for c in map(find_chain, chains) if c is not None), default=0)
    # Polled up to: every record dated up to `synced_through` is stored, and a poll that succeeded found nothing
    # newer than its moment. A block whose deliveries the poll has not had time to store is not missing.
    marks = [m for m in (stream.source.synced_through, stream.source.last_success_at) if m is not None]
    if not marks:
        return "Its source has not been polled yet: there is no history to compare with."
    if min(now, max(marks)) - SETTLE - timedelta(seconds=finality) < end:
        # The whole day or nothing: an audit made now could not sample the day's last blocks.
        return (f"The audited day's last blocks are not final and polled yet (the slowest finality of the stream's "
                f"chains, {finality} s, plus {int(SETTLE.total_seconds() // 60)} min, before the last poll); the "
                "audit tries again at its next run.")
    begins = max(start, stream.first_delivery_at)
    if end <= begins:
        return "The stream's first stored delivery came after the audited day: nothing of it to sample."
    try:
        sample = _sample(stream, begins, end, now, per_stream, rng)
    except WindowRefused as exc:
        return f"Not audited: {exc}"
    planned = sum(len(blocks) for blocks in sample.values())
    if not planned:
        return "No block of the audited day is left to sample (maintenance, outage windows, blocks previewed already)."
    try:
        with transaction.atomic():
            window = OutageWindow.objects.create(
                stream=stream, kind=WindowKind.AUDIT, start=start, end=end,
                label=f"{AUDIT_BY} of {start:%Y-%m-%d %H:%M}–{end:%Y-%m-%d %H:%M} UTC"[:200],
            )
            scan = BlockScan.objects.create(
                window=window, source=stream.source, stream_id=stream.stream_id, requested_by_name=AUDIT_BY,
                state=ScanState.QUEUED, planned=planned, created_at=now, confirmed_at=now,
            )
            BlockScanChain.objects.bulk_create(
                BlockScanChain(scan=scan, chain_id=chain, first_block=blocks[0], last_block=blocks[-1],
                               next_block=blocks[0], sample=blocks,
                               placed_by=f"{len(blocks)} sampled at random from {begins:%Y-%m-%d %H:%M} to "
                                         f"{end:%Y-%m-%d %H:%M} UTC")
                for chain, blocks in sample.items() if blocks
            )
            transaction.on_commit(lambda: queue(scan.pk))
    except IntegrityError:
        # Another planner made this stream's audit meanwhile.
        return ""
    run.queued.append(scan.pk)
    return ""


def _allowed(stream: Stream, start: datetime, end: datetime, now: datetime) -> list[tuple[datetime, datetime]]:
    """[start, end) without the stream's maintenance and outage windows."""
    left_out = intervals(Target(stream.stream_id, stream.tag), start, end)
    outages = OutageWindow.objects.outages().filter(stream=stream, start__lt=end).filter(
        Q(end__isnull=True) | Q(end__gt=start))
    left_out += [(w.start, w.end or now) for w in outages]
    spans: list[tuple[datetime, datetime]] = []
    cursor = start
    for begins, ends in sorted(left_out):
        if begins > cursor:
            spans.append((cursor, min(begins, end)))
        cursor = max(cursor, ends)
    if cursor < end:
        spans.append((cursor, end))
    return [(a, b) for a, b in spans if b > a]


def _sample(stream: Stream, start: datetime, end: datetime, now: datetime, wanted: int,
            rng: random.Random) -> dict[str, list[int]]:
    """Up to `wanted` blocks of the stream's chains, uniformly among the allowed ones, ascending per chain."""
    ranges: list[tuple[str, int, int]] = []
    for begins, ends in _allowed(stream, start, end, now):
        for r in chain_ranges(stream, begins, ends, now=now, max_blocks=MAX_DAY_BLOCKS):
            first, last = r.first + INSET_BLOCKS, r.last - INSET_BLOCKS
            if last >= first:
                ranges.append((r.chain_id, first, last))
    if not ranges:
        return {}
    taken = _taken(stream, ranges)
    total = sum(last - first + 1 for _, first, last in ranges)
    # Drawing as many more as could be taken leaves enough once those are dropped.
    draws = rng.sample(range(total), min(total, wanted + len(taken)))
    picked: dict[str, set[int]] = {}
    count = 0
    for index in draws:
        for chain, first, last in ranges:
            size = last - first + 1
            if index < size:
                block = first + index
                if (chain, block) not in taken and block not in picked.get(chain, set()):
                    picked.setdefault(chain, set()).add(block)
                    count += 1
                break
            index -= size
        if count >= wanted:
            break
    return {chain: sorted(blocks) for chain, blocks in sorted(picked.items())}


def _taken(stream: Stream, ranges: list[tuple[str, int, int]]) -> set[tuple[str, int]]:
    """Blocks of the ranges a scan or audit of the stream previewed already, or a scan not finished will."""
    taken: set[tuple[str, int]] = set()
    for chain, first, last in ranges:
        taken.update(
            (chain, int(n)) for n in PreviewedBlock.objects.filter(
                scan__stream_id=stream.stream_id, chain_id=chain, block_number__gte=first, block_number__lte=last,
            ).values_list("block_number", flat=True)
        )
    unfinished = BlockScanChain.objects.filter(scan__stream_id=stream.stream_id).exclude(
        scan__state__in=SCAN_FINISHED).exclude(scan__window__kind=WindowKind.AUDIT)
    for chain_id, first_block, last_block in unfinished.values_list("chain_id", "first_block", "last_block"):
        for chain, first, last in ranges:
            if chain == chain_id:
                taken.update((chain, n) for n in range(max(first, first_block), min(last, last_block) + 1))
    return taken

