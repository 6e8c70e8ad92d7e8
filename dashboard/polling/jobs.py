"""One scheduled poll of one source: the step the worker's task and the `poll_history` command both run.

It checks that the source is due (enabled, not backing off), takes the per-source lock so that one walk of
a source's checkpoints runs at a time across every worker, beat and terminal, polls, reads the provider's
streams and stats when they are due, and tells the apps above (through `signals`) when new failures were
stored or a stream's status at the provider changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, connection
from django.utils import timezone

from dashboard.deliveries import url_health
from dashboard.locks import exclusive
from dashboard.polling import metrics
from dashboard.polling.signals import failures_stored, stream_status_changed
from dashboard.polling.stream_sync import StreamSync, sync_streams
from dashboard.polling.walks import PollResult, poll
from dashboard.sources.models import Source
from dashboard.upstream.errors import UpstreamError

log = logging.getLogger(__name__)


def source_lock_name(source_id: int) -> str:
    """The lock every walk of a source (poll or backfill) holds."""
    return f"poll:{source_id}"


@dataclass(frozen=True)
class PollRun:
    """What one run did: `result` when it polled; otherwise `skipped` or `error` says why not."""

    source: Source
    result: PollResult | None = None
    skipped: str = ""
    error: str = ""
    # The `outcome` label of the polls metric: ok, incomplete, skipped_*, time_limit or the error's kind.
    outcome: str = "ok"

    @property
    def summary(self) -> str:
        if self.skipped:
            return f"{self.source.name}: skipped, {self.skipped}"
        if self.error:
            return f"{self.source.name}: failed, {self.error}"
        assert self.result is not None
        stored = self.result.stored
        return (
            f"{self.source.name}: {self.result.pages} pages, {stored.inserted} new, {stored.updated} updated, "
            f"{stored.unchanged} unchanged, {len(stored.rejected)} rejected"
            + ("" if self.result.complete else " (incomplete: continues next run)")
        )


def poll_source(source: Source) -> PollRun:
    """Poll the source once if it is due and nobody else is polling it."""
    try:
        run = _poll_source(source)
    except DatabaseError:
        # A database restart mid-poll: the page in flight rolled back with its checkpoint, so the next run
        # (on a new connection) continues where the stored pages end. The worker and `poll_history` both
        # carry on instead of dying with the connection.
        log.warning("source %s: database error during poll; continues next run", source.name, exc_info=True)
        if not connection.in_atomic_block:
            connection.close()
        run = PollRun(source, error="the database connection failed; continues next run", outcome="database_error")
    metrics.observe(source.name, run.outcome)
    return run


def _poll_source(source: Source) -> PollRun:
    if not source.enabled:
        return PollRun(source, skipped="the source is disabled", outcome="skipped_disabled")
    if not source.should_poll():
        return PollRun(source, skipped=f"backing off after {source.last_error_kind or 'an error'} "
                                       f"until {source.backoff_until:%Y-%m-%d %H:%M:%S} UTC",
                       outcome="skipped_backoff")
    with exclusive(source_lock_name(source.pk)) as held:
        if held is None:
            return PollRun(source, skipped="a poll of this source is already running", outcome="skipped_locked")
        try:
            result = poll(source)
        except UpstreamError as exc:
            # Recorded on the source by the poll; the next run tries again.
            log.warning("source %s: poll failed: %s", source.name, exc.message)
            return PollRun(source, error=exc.message, outcome=source.last_error_kind or "upstream_error")
        except SoftTimeLimitExceeded:
            # The page in flight was rolled back; its walk checkpoint resumes in the next run.
            log.warning("source %s: poll hit the soft time limit", source.name)
            return PollRun(source, error="the task's soft time limit was reached; continues next run",
                           outcome="time_limit")
        synced = _sync_streams_if_due(source)
    if result.stored.written:
        # The rows just written changed the rollups: compute the estimate the pages read now, not on the
        # next page view.
        url_health.url_health_now(timezone.now())
    if result.stored.new_failures or result.stored.failed_retries:
        # A retry that failed again is a new failed attempt: an incident of its stream that cleared meanwhile
        # reopens now rather than at the next sweep.
        failures_stored.send(sender=Source, source=source,
                             count=result.stored.new_failures + result.stored.failed_retries)
    if synced is not None and synced.changed:
        stream_status_changed.send(sender=Source, source=source, changed=synced.changed)
    return PollRun(source, result=result, outcome="ok" if result.complete else "incomplete")


def _sync_streams_if_due(source: Source) -> StreamSync | None:
    """The provider's streams and stats, with the poll (under its lock) every STREAM_SYNC_SECONDS."""
    if not source.streams_sync_due():
        return None
    try:
        return sync_streams(source)
    except SoftTimeLimitExceeded:
        log.warning("source %s: stream sync hit the soft time limit", source.name)
        return None
