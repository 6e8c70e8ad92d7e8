"""Completeness: when a stream may have missed blocks, which blocks those are on each of its chains, and which
of them the stored history holds a delivery of.

- A stream's status history (`StreamStatusChange`) is written where `Stream.set_provider_status` is called (the
  stream sync, an action's answer): the first status seen and every change. Its outage windows
  (`OutageWindow`) are derived from it: a run of statuses other than `active`, from the earliest moment the
  change can have happened (the provider's `isErrorSince`, else the last sync that still saw `active`) to the
  sync that saw `active` again (the latest it can have ended), or open. A person may mark a window too.
- A window's block range per chain is placed from the stored deliveries' (block number, block time) pairs of
  that chain, any stream's: the block at a moment is interpolated between the nearest stored blocks mined
  before and after it; beyond the stored ones, extrapolated at the chain's mean block time measured between
  its oldest and newest stored blocks of the last day. Block times vary a little from the mean, so the range
  takes one block more on each side (`MARGIN_BLOCKS`); a block that arrives inside it and was delivered costs
  one preview and finds nothing missing.
- A block counts as received when any delivery of it to the stream is stored, unconfirmed or confirmed, failed
  or delivered: a failed delivery is a replay's matter, not a missing block.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max, Min, QuerySet
from django.utils import timezone

from dashboard.deliveries.models import (
    Delivery,
    OutageWindow,
    Stream,
    StreamStatusChange,
    WindowKind,
)
from dashboard.upstream.chains import find_chain

# One block more on each side of a placed range: block times vary around the interpolation.
MARGIN_BLOCKS = 1
# How far from a moment stored deliveries are looked for to place it (their date follows their block time by
# seconds, or by the chain's finality for confirmed ones).
ANCHOR_REACH = timedelta(hours=6)
# A marked window may span at most this many blocks of a chain.
MAX_WINDOW_BLOCKS = 100_000
ACTIVE = "active"


class WindowRefused(Exception):
    """The window cannot be placed or scanned; the message says why, in words for the user."""


# -- status history and windows -----------------------------------------------------------------------


def note_status_change(stream: Stream, previous: str, previous_seen_at: datetime | None) -> StreamStatusChange:
    """Store the status the stream row just took (saved by the caller), then derive its windows again."""
    assert stream.provider_seen_at is not None and stream.provider_status_since is not None
    with transaction.atomic():
        change = StreamStatusChange.objects.create(
            stream=stream,
            status=stream.provider_status,
            previous=previous,
            since=stream.provider_status_since,
            seen_at=stream.provider_seen_at,
            previous_seen_at=previous_seen_at if previous else None,
        )
        derive_windows(stream)
    return change


def derive_windows(stream: Stream) -> list[OutageWindow]:
    """The stream's provider-status windows, made or closed to match its status history. Idempotent."""
    windows: list[OutageWindow] = []
    current: OutageWindow | None = None
    labels: list[str] = []
    for change in StreamStatusChange.objects.filter(stream=stream).order_by("seen_at", "id"):
        if change.status != ACTIVE and change.status != "":
            if current is None:
                current, _ = OutageWindow.objects.get_or_create(
                    opened_by=change,
                    defaults={"stream": stream, "kind": WindowKind.PROVIDER_STATUS, "start": change.earliest_start,
                              "label": change.status},
                )
                labels = [change.status]
            elif change.status not in labels:
                labels.append(change.status)
            label = " → ".join(labels)[:200]
            if current.label != label or current.end is not None:
                current.label, current.end = label, None
                current.save(update_fields=["label", "end"])
        elif current is not None:
            if current.end != change.seen_at:
                current.end = change.seen_at
                current.save(update_fields=["end"])
            windows.append(current)
            current = None
    if current is not None:
        windows.append(current)
    return windows


def windows_of(stream: Stream) -> QuerySet[OutageWindow]:
    return OutageWindow.objects.filter(stream=stream).order_by("-start", "-id")


def mark_window(stream: Stream, start: datetime, end: datetime, reason: str, who: str,
                *, now: datetime | None = None) -> OutageWindow:
    """A window a person marked (an address reload the provider does not report); checked like any other."""
    now = now or timezone.now()
    if end <= start:
        raise WindowRefused("The window must end after it starts.")
    if end > now:
        raise WindowRefused("The window ends in the future: blocks not mined yet cannot be missing.")
    chain_ranges(stream, start, end)
    return OutageWindow.objects.create(
        stream=stream, kind=WindowKind.MARKED, label=(reason.strip() or "marked by hand")[:200], start=start,
        end=end, marked_by_name=who[:150],
    )


# -- blocks of a window ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainRange:
    chain_id: str
    first: int
    last: int
    # How it was placed, in words for the page.
    placed_by: str

    @property
    def blocks(self) -> int:
        return self.last - self.first + 1


def stream_chains(stream: Stream) -> list[str]:
    """The EVM chains (hex ids) of a stream, as the provider lists them, else as its deliveries named them."""
    return sorted({c.lower() for c in (stream.provider_chain_ids or stream.chain_ids or []) if c})


def check_previewable(stream: Stream) -> list[str]:
    """The stream's chains, or WindowRefused when its blocks cannot be previewed."""
    if stream.provider_kind == "aptos":
        raise WindowRefused("The provider has no block preview for Aptos streams: their missing blocks cannot be "
                            "found this way.")
    chains = stream_chains(stream)
    if not chains:
        raise WindowRefused("This stream's chains are not known yet: no stream sync has listed it and no stored "
                            "delivery names one. Wait for the next sync.")
    unknown = [c for c in chains if find_chain(c) is None]
    if unknown:
        raise WindowRefused(f"No block preview for chain {', '.join(unknown)}: not an EVM chain this dashboard knows.")
    return chains


def chain_ranges(stream: Stream, start: datetime, end: datetime, *, now: datetime | None = None,
                 max_blocks: int = MAX_WINDOW_BLOCKS) -> list[ChainRange]:
    """The block range of [start, end] on each of the stream's chains, one block more on each side."""
    now = now or timezone.now()
    if start >= now:
        raise WindowRefused("The window starts in the future: blocks not mined yet cannot be missing.")
    end = min(end, now)
    ranges = []
    for chain in check_previewable(stream):
        placed = _place(chain, start, end)
        if placed is None:
            raise WindowRefused(
                f"No stored delivery on chain {chain} lies within {ANCHOR_REACH} of this window (or the stored "
                "ones give no block time), so its blocks cannot be placed; mark a window nearer stored history."
            )
        first, last, how = placed
        first, last = max(0, first - MARGIN_BLOCKS), last + MARGIN_BLOCKS
        if last - first + 1 > max_blocks:
            raise WindowRefused(
                f"This window spans {last - first + 1:,} blocks of chain {chain}, more than {max_blocks:,}: "
                "mark a shorter window."
            )
        ranges.append(ChainRange(chain, first, last, how))
    return ranges


def _anchors(chain: str) -> QuerySet[Delivery]:
    return Delivery.objects.filter(chain_id=chain, block_time__isnull=False, block_number__isnull=False)


def _nearest(chain: str, moment: datetime, *, before: bool) -> tuple[int, datetime] | None:
    """The stored block of `chain` mined nearest `moment` on one side, looked for among deliveries dated near it."""
    rows = _anchors(chain).filter(date__gte=moment - ANCHOR_REACH, date__lte=moment + ANCHOR_REACH)
    if before:
        rows = rows.filter(block_time__lte=moment).order_by("-block_time")
    else:
        rows = rows.filter(block_time__gte=moment).order_by("block_time")
    found = rows.values_list("block_number", "block_time").first()
    if found is None or found[0] is None or found[1] is None:
        return None
    return int(found[0]), found[1]


def _mean_block_seconds(chain: str, around: datetime) -> float | None:
    rows = _anchors(chain).filter(date__gte=around - timedelta(days=1), date__lte=around + timedelta(hours=1))
    span = rows.aggregate(b0=Min("block_number"), b1=Max("block_number"), t0=Min("block_time"), t1=Max("block_time"))
    if span["b0"] is None or span["b1"] == span["b0"]:
        return None
    seconds = (span["t1"] - span["t0"]).total_seconds() / (span["b1"] - span["b0"])
    return seconds if seconds > 0 else None


def _block_at(chain: str, moment: datetime) -> tuple[float, str] | None:
    """The (fractional) block mined at `moment`, and how it was placed."""
    below, above = _nearest(chain, moment, before=True), _nearest(chain, moment, before=False)
    if below is not None and above is not None:
        if above[0] == below[0]:
            return float(below[0]), "a stored block of that moment"
        rate = (above[0] - below[0]) / (above[1] - below[1]).total_seconds()
        return below[0] + (moment - below[1]).total_seconds() * rate, "interpolated between stored blocks"
    anchor = below or above
    if anchor is None:
        # Far from anything stored (a window of years): the stored block nearest in date, for its block count.
        rows = _anchors(chain).order_by("date" if moment < timezone.now() - ANCHOR_REACH else "-date")
        found = rows.values_list("block_number", "block_time").first()
        if found is None or found[0] is None or found[1] is None:
            return None
        anchor = (int(found[0]), found[1])
    seconds = _mean_block_seconds(chain, anchor[1])
    if seconds is None:
        return None
    return (anchor[0] + (moment - anchor[1]).total_seconds() / seconds,
            f"from a stored block at the chain's mean block time ({seconds:.2f} s)")


def _place(chain: str, start: datetime, end: datetime) -> tuple[int, int, str] | None:
    first, last = _block_at(chain, start), _block_at(chain, end)
    if first is None or last is None:
        return None
    how = first[1] if first[1] == last[1] else f"start {first[1]}; end {last[1]}"
    return math.floor(first[0]), math.ceil(last[0]), how


# -- what the history holds --------------------------------------------------------------------------------


def received_blocks(stream_id: str, chain: str, blocks: Iterable[int]) -> set[int]:
    """Those of `blocks` of which a delivery to the stream is stored (unconfirmed or confirmed, any status)."""
    wanted = sorted(set(blocks))
    found: set[int] = set()
    for i in range(0, len(wanted), 5000):
        found.update(
            int(n) for n in Delivery.objects.filter(
                stream_id=stream_id, chain_id=chain, block_number__in=wanted[i:i + 5000]
            ).values_list("block_number", flat=True).distinct() if n is not None
        )
    return found


def delivered_after(stream_id: str, blocks: Iterable[tuple[str, int, datetime]]) -> set[tuple[str, int]]:
    """Those (chain, block, moment) of which a delivery to the stream dated at or after the moment is stored:
    a re-sent block's delivery (the provider dates it when it makes it)."""
    found: set[tuple[str, int]] = set()
    by_chain: dict[str, dict[int, datetime]] = {}
    for chain, block, moment in blocks:
        by_chain.setdefault(chain, {})[block] = moment
    for chain, moments in by_chain.items():
        numbers = sorted(moments)
        for i in range(0, len(numbers), 5000):
            rows = Delivery.objects.filter(
                stream_id=stream_id, chain_id=chain, block_number__in=numbers[i:i + 5000]
            ).values_list("block_number", "date")
            found.update((chain, int(n)) for n, date in rows if n is not None and date >= moments[int(n)])
    return found
