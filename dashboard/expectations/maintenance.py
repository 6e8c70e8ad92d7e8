"""When a target is in maintenance: the occurrences of the maintenance windows (a recurring window's from its cron
expression in its own time zone, so "03:00 Europe/Berlin" stays 03:00 local across daylight saving), which are
active now and which come next, and which hours of a stream's past they cover.

`in_maintenance(target, now)` is the one question the alerts, the quiet-stream baselines and the error budgets
ask; `Maintenance.at(now)` answers it for many targets with one read of the windows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronsim import CronSim, CronSimError

from dashboard.deliveries.models import Stream
from dashboard.deliveries.scopes import in_scope
from dashboard.expectations.models import MaintenanceWindow
from dashboard.times import zone

# How far ahead the page looks for the next occurrences.
UPCOMING = timedelta(days=14)
# A recurring window's occurrences read for one range at most (a cron of every minute over 30 days is 43 k).
MAX_OCCURRENCES = 50_000


@dataclass(frozen=True)
class Target:
    """What a window may cover: a stream (its id and tag) or, with neither, something of no stream (a source)."""

    stream_id: str = ""
    tag: str | None = None


@dataclass(frozen=True)
class Occurrence:
    window: MaintenanceWindow
    start: datetime
    end: datetime


def occurrences(window: MaintenanceWindow, start: datetime, end: datetime) -> Iterator[Occurrence]:
    """The window's occurrences overlapping [start, end), in time order."""
    if not window.recurring:
        if window.starts_at is not None and window.ends_at is not None:
            if window.starts_at < end and window.ends_at > start:
                yield Occurrence(window, window.starts_at, window.ends_at)
        return
    duration = window.duration
    if duration <= timedelta(0):
        return
    try:
        tz = zone(window.time_zone)
        # cronsim gives the times strictly after the one it starts from: an occurrence starting exactly at
        # start − duration has ended by start.
        times = CronSim(window.cron, (start - duration).astimezone(tz))
    except (CronSimError, ValueError):
        # Checked when saved; a window made invalid since (a zone gone from the tz database) covers nothing.
        return
    for n, begins in enumerate(times):
        if begins >= end or n >= MAX_OCCURRENCES:
            return
        yield Occurrence(window, begins, begins + duration)


def current(window: MaintenanceWindow, now: datetime) -> Occurrence | None:
    """The window's occurrence under way at `now`; overlapping occurrences (a cron firing more often than each lasts)
    count as one, from the earliest start to the latest end."""
    under_way = list(occurrences(window, now, now + timedelta(microseconds=1)))
    if not under_way:
        return None
    return Occurrence(window, min(o.start for o in under_way), max(o.end for o in under_way))


class Maintenance:
    """The windows active at one moment, read once, asked for many targets."""

    def __init__(self, active: list[Occurrence]) -> None:
        self.active = active

    @classmethod
    def at(cls, now: datetime) -> Maintenance:
        windows = MaintenanceWindow.objects.may_cover(now, now + timedelta(microseconds=1))
        return cls([o for o in (current(w, now) for w in windows) if o is not None])

    def covering(self, target: Target) -> list[Occurrence]:
        """The active occurrences covering `target`; a stream's tag is read from its row when a tag window needs it."""
        if not self.active:
            return []
        tag = target.tag
        if tag is None and target.stream_id and any(o.window.scope == "tag" for o in self.active):
            tag = Stream.objects.filter(stream_id=target.stream_id).values_list("tag", flat=True).first() or ""
        columns = {"stream_id": target.stream_id, "tag": tag or ""} if target.stream_id else {}
        return [o for o in self.active if in_scope(o.window.scope_filter(), **columns)]

    def covers(self, target: Target) -> bool:
        return bool(self.covering(target))

    def streams_covered(self, streams: Iterable[tuple[str, str]]) -> dict[str, Occurrence]:
        """Of (stream id, tag) pairs, those in maintenance, with the occurrence that ends last."""
        found: dict[str, Occurrence] = {}
        for stream_id, tag in streams:
            covering = self.covering(Target(stream_id, tag))
            if covering:
                found[stream_id] = max(covering, key=lambda o: o.end)
        return found


def in_maintenance(target: Target, now: datetime) -> bool:
    """Whether a maintenance window covers `target` at `now`."""
    return Maintenance.at(now).covers(target)


def intervals(
    target: Target, start: datetime, end: datetime, windows: Iterable[MaintenanceWindow] | None = None
) -> list[tuple[datetime, datetime]]:
    """The stretches of [start, end) a maintenance window covered for `target`, merged, in time order: what the
    quiet-stream baselines and the error budgets leave out. `windows`: those read already (for many targets)."""
    spans = sorted(
        (max(o.start, start), min(o.end, end))
        for window in (MaintenanceWindow.objects.may_cover(start, end) if windows is None else windows)
        if in_scope(window.scope_filter(), stream_id=target.stream_id, tag=target.tag or "")
        for o in occurrences(window, start, end)
    )
    merged: list[tuple[datetime, datetime]] = []
    for begins, ends in spans:
        if merged and begins <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], ends))
        else:
            merged.append((begins, ends))
    return merged


def schedule(now: datetime) -> tuple[list[Occurrence], list[Occurrence]]:
    """The occurrences active at `now` and the next one of each window within UPCOMING (not already active)."""
    active: list[Occurrence] = []
    upcoming: list[Occurrence] = []
    for window in MaintenanceWindow.objects.may_cover(now, now + UPCOMING):
        under_way = current(window, now)
        if under_way is not None:
            active.append(under_way)
        # The next occurrence starting after now.
        for occurrence in occurrences(window, now, now + UPCOMING):
            if occurrence.start > now:
                upcoming.append(occurrence)
                break
    return sorted(active, key=lambda o: o.end), sorted(upcoming, key=lambda o: o.start)
